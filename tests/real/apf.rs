//! APF: priority and fairness (or the max-in-flight filter) rejects requests — a flood on a tiny
//! queued level, a level that rejects instead of queueing, the whole server's concurrency made
//! tiny, a FlowSchema whose precedence swallows every user — each by a different mechanism. While
//! APF rejects a flood, the API server's own latency (etcd's included) is a consequence: no
//! Storage verdict (3b).

use std::time::Duration;

use super::{Checks, Expect, SETTLE, Scan, analyze_raw, on_both, scan, why};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::pki::users;
use crate::util::k8s::traffic::{Call, Traffic};
use crate::util::k8s::{Assets, ControlPlane, Generation};

/// A namespace of `count` ConfigMaps of `kib` KiB each (a LIST of it takes real work), readable
/// by the token users' groups.
fn load(cp: &ControlPlane, ns: &str, count: usize) {
    load_sized(cp, ns, count, 16)
}

fn load_sized(cp: &ControlPlane, ns: &str, count: usize, kib: usize) {
    let mut yaml = format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-reader}}
rules:
- {{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-reader}}
subjects:
- {{kind: Group, name: wardle-users, apiGroup: rbac.authorization.k8s.io}}
- {{kind: Group, name: flooders, apiGroup: rbac.authorization.k8s.io}}
"#
    );
    let blob = "z".repeat(kib * 1024);
    for i in 0..count {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: data-{i}, namespace: {ns}}}\ndata: {{blob: {blob}}}\n"
        ));
    }
    cp.apply(&yaml);
}

/// A Limited PriorityLevelConfiguration of one share with `limit_response` (YAML of the
/// `limitResponse` object), kept small on 1.36 (no lending, no borrowing).
fn level(cp: &ControlPlane, name: &str, limit_response: &str) {
    let api = cp.generation.flowcontrol();
    let shares = match cp.generation {
        Generation::V1_24 => "assuredConcurrencyShares: 1".to_string(),
        Generation::V1_36 => {
            "nominalConcurrencyShares: 1\n    lendablePercent: 0\n    borrowingLimitPercent: 0"
                .to_string()
        }
    };
    cp.apply(&format!(
        r#"apiVersion: {api}
kind: PriorityLevelConfiguration
metadata: {{name: {name}}}
spec:
  type: Limited
  limited:
    {shares}
    limitResponse: {limit_response}
"#
    ));
}

/// A FlowSchema sending `subject` (YAML of one subject) to `level`, at `precedence`.
fn schema(cp: &ControlPlane, name: &str, level: &str, precedence: u32, subject: &str) {
    let api = cp.generation.flowcontrol();
    cp.apply(&format!(
        r#"apiVersion: {api}
kind: FlowSchema
metadata: {{name: {name}}}
spec:
  priorityLevelConfiguration: {{name: {level}}}
  matchingPrecedence: {precedence}
  distinguisherMethod: {{type: ByUser}}
  rules:
  - subjects: [{subject}]
    resourceRules: [{{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}}]
    nonResourceRules: [{{verbs: ["*"], nonResourceURLs: ["*"]}}]
"#
    ));
}

/// `clients` loops LISTing `ns`'s ConfigMaps as the token user `token`, without pause.
fn flood(cp: &ControlPlane, ns: &str, token: &'static str, clients: usize) -> Traffic {
    Traffic::start(
        cp,
        vec![Call::get(&format!("/api/v1/namespaces/{ns}/configmaps")).by_user(token)],
        clients,
        Duration::from_millis(0),
    )
}

fn wait_429(cp: &ControlPlane, t: &Traffic) {
    cp.poll("clients receive 429s", SETTLE, || {
        (t.count(429) > 5).then_some(())
    });
}

/// No verdict of class Storage at warning or above (3b).
fn assert_no_storage(s: &Scan) {
    let storage: Vec<String> = s
        .problems()
        .into_iter()
        .filter(|p| p.starts_with("Storage"))
        .collect();
    assert!(
        storage.is_empty(),
        "3b: APF rejecting a flood is not slow storage: {storage:?}\n{}",
        s.describe()
    );
}

/// A flooding client (group `flooders`) on a tiny queued priority level: its one queue of length
/// 1 overflows, the rest get 429 (`queue-full`).
fn flood_tiny_queued_level(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    // As the 12-apf capture: LISTs of megabytes, each admitted one a second of work, so the
    // server's own latency (its etcd calls' included) rises under the flood.
    load_sized(&cp, "telemetry", 250, 20);
    level(
        &cp,
        "batch-small",
        "{type: Queue, queuing: {queues: 1, handSize: 1, queueLengthLimit: 1}}",
    );
    schema(
        &cp,
        "batch-jobs",
        "batch-small",
        200,
        "{kind: Group, group: {name: flooders}}",
    );
    let t = flood(&cp, "telemetry", users::FLOODER.1, 24);
    wait_429(&cp, &t);
    let s = scan(&cp, &[]);
    assert_no_storage(&s);
    // `why` of one of the flooding user's LISTs, as the on-call runs it (impersonating the user
    // and its group): the first of a few that is rejected — one the queue admitted is not the
    // failing request.
    let path = "/api/v1/namespaces/telemetry/configmaps";
    let as_flooder = ["--as", users::FLOODER.0, "--as-group", "flooders"];
    let w = cp.poll("why of a rejected LIST", SETTLE, || {
        let w = why(&cp, "LIST", path, &as_flooder);
        (w.request_status() == Some(429)).then_some(w)
    });
    // What an on-call engineer saves during the flood: the usual objects (the FlowSchemas and
    // levels among them) and dumps, kube-apiserver's log (slow `List etcd3` traces of the admitted
    // LISTs among them), and the user's rejected `kubectl get -v=6`. The overload's latency is not a storage fault there either (3b).
    let mut incident = Incident::new();
    cp.poll("a kubectl get of the flooder rejected", SETTLE, || {
        let out = cp.kubectl_output(
            &[
                "get",
                "configmaps",
                "-n",
                "telemetry",
                "-v=6",
                "--as",
                users::FLOODER.0,
                "--as-group",
                "flooders",
            ],
            None,
        );
        let text = format!(
            "{}{}exit={}\n",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            out.status.code().unwrap_or(-1)
        );
        text.contains(" 429 ")
            .then(|| incident.write("kubectl-get-flooder", &text))
    });
    incident.usual(&cp);
    incident.log("kube-apiserver", cp.kube_apiserver(), 2000);
    let a = analyze_raw(incident.path());
    assert_no_storage(&a);
    let on_level = || Expect::Problem {
        class: "APF",
        kind: "PriorityLevel",
        name: "batch-small".into(),
        severity: "critical",
    };
    Checks::scan_why_raw(on_level(), s, w, ("APF", "critical"), a)
}
on_both!(flood_tiny_queued_level);

/// A level with `limitResponse: Reject`: every request past its concurrency limit is rejected at
/// once (`concurrency-limit`), no queueing.
fn reject_level(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    load(&cp, "exports", 60);
    level(&cp, "no-queue", "{type: Reject}");
    schema(
        &cp,
        "exporters",
        "no-queue",
        300,
        "{kind: User, user: {name: flooder}}",
    );
    let t = flood(&cp, "exports", users::FLOODER.1, 16);
    wait_429(&cp, &t);
    let s = scan(&cp, &[]);
    assert_no_storage(&s);
    (
        s,
        Expect::Problem {
            class: "APF",
            kind: "PriorityLevel",
            name: "no-queue".into(),
            severity: "critical",
        },
    )
}
on_both!(reject_level);

/// The whole server's concurrency made tiny: kube-apiserver restarted with
/// `--max-requests-inflight=1 --max-mutating-requests-inflight=1` and priority and fairness off
/// (the max-in-flight filter then guards the server): ordinary users' requests past one at a time
/// are rejected with 429 before any FlowSchema is consulted.
fn server_inflight_tiny(assets: &Assets) -> (Scan, Expect) {
    let mut cp = ControlPlane::start(assets, &[]);
    load(&cp, "catalog", 40);
    cp.restart_kube_apiserver(|flags| {
        ControlPlane::set_flag(flags, "max-requests-inflight", "1");
        ControlPlane::set_flag(flags, "max-mutating-requests-inflight", "1");
        ControlPlane::set_flag(flags, "enable-priority-and-fairness", "false");
    });
    let t = flood(&cp, "catalog", users::ALICE.1, 12);
    wait_429(&cp, &t);
    let s = scan(&cp, &[]);
    assert_no_storage(&s);
    (
        s,
        Expect::Problem {
            class: "APF",
            kind: "APIServer",
            name: "kube-apiserver".into(),
            severity: "critical",
        },
    )
}
on_both!(server_inflight_tiny);

/// Invented from APF's classification (`apiserver/pkg/util/flowcontrol/apf_controller.go`,
/// `digestConfigObjects`: FlowSchemas sorted by `matchingPrecedence`, the first match wins, and
/// only `exempt` and `catch-all` are mandatory): a FlowSchema meant for one team's batch jobs is
/// written for group `system:authenticated` with precedence 10 — below every suggested schema
/// (`global-default` is 9900) — so every ordinary user, not only the team, lands on its tiny
/// level, and ordinary traffic (here: alice, not a flooder) is rejected.
fn schema_swallows_everyone(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    load(&cp, "shared", 40);
    level(
        &cp,
        "team-batch",
        "{type: Queue, queuing: {queues: 2, handSize: 1, queueLengthLimit: 2}}",
    );
    schema(
        &cp,
        "team-batch-jobs",
        "team-batch",
        10,
        "{kind: Group, group: {name: \"system:authenticated\"}}",
    );
    let t = flood(&cp, "shared", users::ALICE.1, 20);
    wait_429(&cp, &t);
    let s = scan(&cp, &[]);
    assert_no_storage(&s);
    (
        s,
        Expect::Problem {
            class: "APF",
            kind: "PriorityLevel",
            name: "team-batch".into(),
            severity: "critical",
        },
    )
}
on_both!(schema_swallows_everyone);
