//! Fleet benchmark (issue 14): ten reference servers with small scenarios, scanned as one fleet
//! (`scan --context c0,…,c9`, default `--parallel`) and one at a time (ten `scan --context cN`
//! processes in a row), in one run; wall time and each process's peak RSS.
//!
//! Each cluster has four aggregated APIs (one with its Service missing, the others served by a
//! real extension server with a TLS certificate) and one CRD; its Services have names of their own
//! so that one `--backend-address` list serves every cluster. Everything listens on 127.0.0.1,
//! and the servers run in this process, sharing the 2 cores with the scans as a real fleet's API
//! servers would not — both sides pay that alike.
//!
//! Run: `cargo bench --bench fleet` (release build). Not a test: nothing fails on a slow machine;
//! it reports. `EXTPATH_FLEET_ROUNDS=N` repeats both sides N times (default 3) and reports medians.

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use extpath::refserver::{ClientAuth, RefServer, RunningServer, StartOptions, scenario};

const CLUSTERS: usize = 10;
const APISERVICES: usize = 4;

fn scenario_yaml(c: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: fleet-{c}\nserver:\n  availabilityPeriodMs: 600000\ncas: [ext-ca]\nbackends:"
    );
    for i in 0..APISERVICES {
        let _ = writeln!(
            s,
            "  - name: ext{i}\n    kind: extension\n    certificate: {{issuer: ext-ca, names: [api.c{c}-ext{i}.svc]}}\n    extension:\n      groupVersion: group{i}.example.com/v1\n      resources: [{{name: things, kind: Thing}}]"
        );
    }
    s.push_str("network:\n");
    for i in 0..APISERVICES {
        let _ = writeln!(s, "  10.244.0.{}: ext{i}", i + 1);
    }
    s.push_str("objects:\n");
    for i in 0..APISERVICES {
        let ns = format!("c{c}-ext{i}");
        let _ = writeln!(
            s,
            "  - {{apiVersion: v1, kind: Namespace, metadata: {{name: {ns}}}}}"
        );
        // The first APIService of every cluster points at a Service that does not exist.
        if i > 0 {
            let _ = writeln!(
                s,
                "  - {{apiVersion: v1, kind: Service, metadata: {{name: api, namespace: {ns}}}, spec: {{ports: [{{name: https, port: 443, targetPort: 8443}}]}}}}\n  - {{apiVersion: v1, kind: Endpoints, metadata: {{name: api, namespace: {ns}}}, subsets: [{{addresses: [{{ip: 10.244.0.{}}}], ports: [{{name: https, port: 8443}}]}}]}}",
                i + 1
            );
        }
        let _ = writeln!(
            s,
            "  - {{apiVersion: apiregistration.k8s.io/v1, kind: APIService, metadata: {{name: v1.group{i}.example.com}}, spec: {{group: group{i}.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, service: {{namespace: {ns}, name: api, port: 443}}, caBundle: '${{ca:ext-ca}}'}}}}"
        );
    }
    s.push_str("  - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: widgets.crd.example.com}, spec: {group: crd.example.com, scope: Namespaced, names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}}\n");
    s
}

/// A kubeconfig with one context per server, `c0` … `c9`.
fn kubeconfig(servers: &[RunningServer]) -> String {
    let mut clusters = Vec::new();
    let mut users = Vec::new();
    let mut contexts = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        let kc: serde_json::Value =
            serde_saphyr::from_str(&s.kubeconfig(ClientAuth::Token)).expect("kubeconfig parses");
        let name = format!("c{i}");
        clusters.push(serde_json::json!({"name": name, "cluster": kc["clusters"][0]["cluster"]}));
        users.push(serde_json::json!({"name": name, "user": kc["users"][0]["user"]}));
        contexts
            .push(serde_json::json!({"name": name, "context": {"cluster": name, "user": name}}));
    }
    serde_json::to_string(&serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c0",
        "clusters": clusters, "users": users, "contexts": contexts
    }))
    .expect("serialises")
}

#[path = "support/peak.rs"]
mod peak;

/// Run a command to its end; its wall time, exit code, stdout and its own peak RSS (KB).
fn run(cmd: &mut Command) -> (Duration, i32, Vec<u8>, i64) {
    let f = peak::run(cmd);
    (f.wall, f.code, f.stdout, f.peak_kb as i64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rounds = std::env::var("EXTPATH_FLEET_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(3);
    let servers: Vec<RunningServer> = (0..CLUSTERS)
        .map(|c| {
            let sc = scenario::load_str(&scenario_yaml(c), "fleet.yaml").expect("scenario loads");
            rt.block_on(RefServer::start(sc, StartOptions::default()))
                .expect("server starts")
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, kubeconfig(&servers)).unwrap();
    let mut addresses = Vec::new();
    for s in &servers {
        for (svc, addr) in s.backend_addresses() {
            addresses.push(format!("{svc}={addr}"));
        }
    }
    let bin = env!("CARGO_BIN_EXE_kubectl-extpath");
    let scan = |context: &str| {
        let mut c = Command::new(bin);
        c.env("KUBECONFIG", &kc)
            .env("HOME", dir.path())
            .args(["scan", "--context", context, "--window", "0", "-o", "json"])
            .args(["--request-timeout", "10s", "--timeout", "60s"]);
        for a in &addresses {
            c.arg("--backend-address").arg(a);
        }
        c
    };
    let all: Vec<String> = (0..CLUSTERS).map(|i| format!("c{i}")).collect();
    let fleet_arg = all.join(",");

    let (mut fleet_walls, mut seq_walls) = (Vec::new(), Vec::new());
    let (mut fleet_rss, mut seq_rss) = (0i64, 0i64);
    let mut found = 0usize;
    for round in 0..rounds {
        // Alternate which side goes first, so neither always finds the servers warm.
        let mut sides = [true, false];
        if round % 2 == 1 {
            sides.reverse();
        }
        for fleet_side in sides {
            if fleet_side {
                let (wall, code, out, rss) = run(&mut scan(&fleet_arg));
                assert_eq!(code, 1, "every cluster has a broken APIService");
                let d: serde_json::Value = serde_json::from_slice(&out).expect("a fleet document");
                assert_eq!(d["summary"]["with_problems"], CLUSTERS);
                found = d["clusters"]
                    .as_array()
                    .map(|cs| {
                        cs.iter()
                            .flat_map(|c| c["verdicts"].as_array().into_iter().flatten())
                            .filter(|v| v["subject"]["kind"] == "APIService")
                            .count()
                    })
                    .unwrap_or(0);
                fleet_walls.push(wall.as_secs_f64());
                fleet_rss = fleet_rss.max(rss);
            } else {
                let started = Instant::now();
                for ctx in &all {
                    let (_, code, _, rss) = run(&mut scan(ctx));
                    assert_eq!(code, 1, "{ctx}: the broken APIService fails the gate");
                    seq_rss = seq_rss.max(rss);
                }
                seq_walls.push(started.elapsed().as_secs_f64());
            }
        }
    }
    let (f, s) = (median(fleet_walls), median(seq_walls));
    println!(
        "fleet of {CLUSTERS} clusters ({APISERVICES} APIServices and 1 CRD each), scan --window 0, median of {rounds} rounds:"
    );
    println!(
        "  one fleet scan (--context c0,…,c9, --parallel 4):   {f:6.2} s   peak RSS {:4.0} MB   {found} APIService verdicts",
        fleet_rss as f64 / 1024.0
    );
    println!(
        "  ten scans one at a time (ten processes in a row):   {s:6.2} s   peak RSS {:4.0} MB (largest of the ten)",
        seq_rss as f64 / 1024.0
    );
    println!(
        "  wall time fleet / sequential:                       {:6.3}",
        f / s
    );
    println!(
        "  peak RSS fleet / one scan:                          {:6.3}",
        fleet_rss as f64 / seq_rss.max(1) as f64
    );
    for s in servers {
        rt.block_on(s.shutdown());
    }
}
