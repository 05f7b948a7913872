//! Watch: streams that go wrong while the request path itself answers — watchers kube-apiserver
//! terminates, a resume past the extension's etcd compaction or across a restart of
//! kube-apiserver's watch cache, a stream broken by a crash. The scan sees what kube-apiserver's
//! metrics count (watchers it had to terminate); a single stream's fate is seen by `why WATCH` and
//! by `analyze --raw` of the client's saved stream.

use std::time::Duration;

use super::{Checks, Expect, SETTLE, analyze_raw, on_1_36, on_both, scan, why};
use crate::util::k8s::extension::{Extension, GROUP_VERSION, Placement};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::traffic::{Call, StalledWatch, Traffic};
use crate::util::k8s::{Assets, ControlPlane, RUNTIME};

/// Controllers that stop reading their watches while objects keep changing: kube-apiserver's
/// watch cache cannot hand them events and terminates them
/// (`apiserver_terminated_watchers_total`, cacher.go "Forcing … watcher close due to
/// unresponsiveness").
///
/// 1.36 only: the 1.24 snapshot (2021-12) kept a stalled cache watcher for over a minute of
/// 64 KB events (the connection's send queue full at 2.8 MB, no termination counted), so there
/// the same fault shows only on the clients.
fn slow_consumers_terminated(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    cp.kubectl(&["create", "namespace", "busy-team"]);
    // 64 KB per object: a few dozen events fill a stalled client's buffers, while each write
    // stays cheap for etcd.
    let big = "x".repeat(64 * 1024);
    cp.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: churn, namespace: busy-team}}\ndata: {{blob: \"{big}\", n: \"0\"}}\n"
    ));
    // As an informer watches: from the resourceVersion of its list, which kube-apiserver serves
    // from its watch cache (1.24 sends a watch without one straight to etcd, whose gRPC stream
    // just blocks instead).
    let watch_path = || {
        let (_, list) = cp.raw_get("/api/v1/namespaces/busy-team/configmaps?limit=1");
        let rv = serde_json::from_str::<serde_json::Value>(&list).unwrap()["metadata"]
            ["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        format!("/api/v1/namespaces/busy-team/configmaps?watch=1&resourceVersion={rv}")
    };
    let mut held = Vec::new();
    for _ in 0..5 {
        if let Some(w) = StalledWatch::open(&cp, &watch_path()) {
            held.push(w);
        }
    }
    let patch = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"churn","namespace":"busy-team"}},"data":{{"blob":"{big}","n":"{{n}}"}}}}"#
    );
    let writers = Traffic::start(
        &cp,
        vec![Call {
            method: reqwest::Method::PUT,
            path: "/api/v1/namespaces/busy-team/configmaps/churn".into(),
            body: Some(patch),
            token: None,
        }],
        1,
        Duration::from_millis(10),
    );
    cp.poll(
        "kube-apiserver terminates a stalled watcher",
        SETTLE,
        || {
            let (_, m) = cp.raw_get("/metrics");
            m.lines()
                .any(|l| l.starts_with("apiserver_terminated_watchers_total") && !l.ends_with(" 0"))
                .then_some(())
        },
    );
    // Fresh stalled watchers through the scan's window.
    let mut more = Vec::new();
    let s = std::thread::scope(|sc| {
        let h = sc.spawn(|| scan(&cp, &["--window", "10s"]));
        for _ in 0..40 {
            if h.is_finished() {
                break;
            }
            if let Some(w) = StalledWatch::open(&cp, &watch_path()) {
                more.push(w);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        h.join().unwrap()
    });
    drop((writers, held, more));
    (
        s,
        Expect::Problem {
            class: "Watch",
            kind: "APIServer",
            name: "kube-apiserver".into(),
            severity: "warning",
        },
    )
        .into()
}
on_1_36!(slow_consumers_terminated);

/// Create `n` Flunders in `ns` through the aggregator; the resourceVersion of the first.
fn flunders(cp: &ControlPlane, ns: &str, n: usize) -> String {
    let mut first = String::new();
    for i in 0..n {
        let out = cp.kubectl_output(
            &["create", "-f", "-", "-o", "jsonpath={.metadata.resourceVersion}"],
            Some(&format!(
                r#"{{"apiVersion":"{GROUP_VERSION}","kind":"Flunder","metadata":{{"name":"f{i}","namespace":"{ns}"}}}}"#
            )),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if i == 0 {
            first = String::from_utf8_lossy(&out.stdout).into_owned();
        }
    }
    first
}

/// A controller resumes its watch of an aggregated resource from a resourceVersion its
/// extension's etcd has compacted away (the extension runs without a watch cache, so the watch
/// goes to etcd): a 200 whose stream carries a 410 `Expired` ERROR event.
fn watch_resumed_after_compaction(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(
        &cp,
        Placement {
            namespace: "catalog-system".into(),
            service: "catalog-api".into(),
        },
    );
    ext.restart(&cp, |flags| {
        flags.push("--watch-cache=false".into());
        flags.push("--etcd-compaction-interval=1s".into());
    });
    ext.wait_served(&cp);
    cp.kubectl(&["create", "namespace", "orders"]);
    let old = flunders(&cp, "orders", 3);
    let path =
        format!("/apis/{GROUP_VERSION}/namespaces/orders/flunders?watch=1&resourceVersion={old}");
    // Until the compactor has passed that revision the watch is served.
    cp.poll(
        "the extension's etcd compacts past the first revision",
        SETTLE,
        || {
            let _ = flunders_update(&cp);
            let (_, body) = cp.raw_get(&format!("{path}&timeoutSeconds=1"));
            body.contains("\"code\":410").then_some(())
        },
    );
    expired_resume(&cp, &path)
}

/// A resumed watch at `path` (`…?watch=1&resourceVersion=…`) that the server expired: `why` of
/// it, and `analyze --raw` of the folder with the controller's `curl -N` of it, each a Watch
/// warning on the request.
fn expired_resume(cp: &ControlPlane, path: &str) -> Checks {
    let mut incident = Incident::new();
    incident.usual(cp);
    incident.curl_apiserver(cp, "controller-watch", path, &["-N", "--max-time", "3"]);
    let name = format!("WATCH {}", path.split('?').next().unwrap_or(path));
    vec![
        (
            why(cp, "WATCH", path, &["--watch-for", "3s"]),
            Expect::Request {
                class: "Watch",
                severity: "warning",
            },
        ),
        (
            analyze_raw(incident.path()),
            Expect::Problem {
                class: "Watch",
                kind: "Request",
                name,
                severity: "warning",
            },
        ),
    ]
    .into()
}
on_both!(watch_resumed_after_compaction);

/// One more write, so the compactor has a newer revision to compact to.
fn flunders_update(cp: &ControlPlane) -> bool {
    cp.kubectl_output(
        &[
            "annotate",
            "--overwrite",
            "-n",
            "orders",
            "flunders.wardle.example.com",
            "f1",
            &format!(
                "tick={}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ),
        ],
        None,
    )
    .status
    .success()
}

/// The extension server crashes (SIGKILL) while a watch through the aggregator is open: the
/// stream breaks mid-way (HTTP/2 INTERNAL_ERROR, "unable to decode an event from the watch
/// stream").
fn watch_broken_by_extension_crash(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(
        &cp,
        Placement {
            namespace: "inventory".into(),
            service: "inventory-api".into(),
        },
    );
    cp.kubectl(&["create", "namespace", "shelf"]);
    flunders(&cp, "shelf", 1);
    let path = format!("/apis/{GROUP_VERSION}/namespaces/shelf/flunders");
    let w = std::thread::scope(|sc| {
        let h = sc.spawn(|| why(&cp, "WATCH", &path, &["--watch-for", "20s"]));
        wait_extension_watch_open(&cp, &ext);
        ext.daemon.signal("KILL");
        h.join().unwrap()
    });
    let _ = ext.daemon.wait_exit();
    (
        w,
        Expect::Request {
            class: "Watch",
            severity: "critical",
        },
    )
        .into()
}
on_both!(watch_broken_by_extension_crash);

/// Poll the extension's own `/metrics` until it counts an open WATCH (the stream the aggregator
/// proxies), so the fault lands mid-stream.
fn wait_extension_watch_open(cp: &ControlPlane, ext: &Extension) {
    let cfg = crate::util::k8s::pki::client_tls(&cp.pki, &["http/1.1"]);
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(cfg)
        .no_proxy()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/metrics", ext.port);
    cp.poll("the extension serves an open watch", SETTLE, || {
        let body = RUNTIME.block_on(async {
            match http.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        });
        body.lines()
            .any(|l| {
                (l.starts_with("apiserver_longrunning_requests{")
                    || l.starts_with("apiserver_longrunning_gauge{"))
                    && l.contains("verb=\"WATCH\"")
                    && l.contains("flunders")
                    && !l.ends_with(" 0")
            })
            .then_some(())
    });
}

/// Invented from kube-apiserver's watch cache (`apiserver/pkg/storage/cacher/cacher.go`, `Watch`
/// → `watchCache.getAllEventsSinceLocked`: a resourceVersion older than the cache's oldest event
/// is "too old resource version", sent as an ERROR event after a 200, "to match the uncached
/// watch implementation"): the cache is built afresh from a LIST when kube-apiserver starts, so
/// after a restart (an upgrade, a static Pod's manifest edited) every controller that resumes its
/// watch of a built-in resource from the resourceVersion it last saw gets 410 Expired and must
/// relist — here with etcd compacting nothing and no extension involved: the cache window, not
/// compaction.
fn watch_resumed_across_apiserver_restart(assets: &Assets) -> Checks {
    let mut cp = ControlPlane::start(assets, &[]);
    cp.kubectl(&["create", "namespace", "payments"]);
    let last_seen = configmap_rv(&cp, "payments", "cursor");
    for i in 0..3 {
        configmap_rv(&cp, "payments", &format!("later-{i}"));
    }
    cp.restart_kube_apiserver(|_| {});
    let path =
        format!("/api/v1/namespaces/payments/configmaps?watch=1&resourceVersion={last_seen}");
    // The new cache starts at the revision of its first LIST; until it is built (1.3x answers 429
    // while it initialises) the watch is not judged.
    cp.poll("the resumed watch is expired", SETTLE, || {
        let (_, body) = cp.raw_get(&format!("{path}&timeoutSeconds=1"));
        body.contains("\"code\":410").then_some(())
    });
    expired_resume(&cp, &path)
}
on_both!(watch_resumed_across_apiserver_restart);

/// Create ConfigMap `name` in `ns`; its resourceVersion.
fn configmap_rv(cp: &ControlPlane, ns: &str, name: &str) -> String {
    let out = cp.kubectl_output(
        &[
            "create",
            "configmap",
            name,
            "-n",
            ns,
            "--from-literal=at=0",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
