//! Fleet scan with the real parts: three reference servers in one kubeconfig — one broken (its
//! APIService's Service is missing), one whose API server rejects the scanning credentials, one
//! healthy — scanned in one `scan --context a,b,c` run, with `--all-contexts`, and collected into a
//! fleet bundle directory that `analyze DIR` reads back; and, beside a healthy one, a cluster whose
//! RBAC forbids every list and one that refuses connections. Each cluster's verdicts, each its own
//! exit code, the run's exit code the worst; the JSON document checked against
//! docs/fleet.schema.json; the table snapshotted.

use extpath::refserver::{ClientAuth, RunningServer};
use serde_json::{Value, json};

use crate::util::{Files, extpath_run, start, start_text};

/// The three clusters, and a kubeconfig naming them `broken`, `forbidden` and `healthy` (current:
/// `healthy`).
struct Fleet {
    broken: RunningServer,
    forbidden: RunningServer,
    healthy: RunningServer,
    files: Files,
}

impl Fleet {
    async fn start() -> Self {
        let broken = start("aggregation-service-missing").await;
        let forbidden = start("healthy").await;
        let healthy = start("healthy").await;
        let files = Files::new();
        let entry = |s: &RunningServer| -> (Value, Value) {
            let kc: Value = serde_saphyr::from_str(&s.kubeconfig(ClientAuth::Token)).unwrap();
            (
                kc["clusters"][0]["cluster"].clone(),
                kc["users"][0]["user"].clone(),
            )
        };
        let (b_cluster, b_user) = entry(&broken);
        let (f_cluster, _) = entry(&forbidden);
        let (h_cluster, h_user) = entry(&healthy);
        let doc = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "healthy",
            "clusters": [
                {"name": "broken", "cluster": b_cluster},
                {"name": "forbidden", "cluster": f_cluster},
                {"name": "healthy", "cluster": h_cluster},
            ],
            "users": [
                {"name": "broken-admin", "user": b_user},
                // A token this API server does not know: every read is 401.
                {"name": "stranger", "user": {"token": "no-such-token"}},
                {"name": "healthy-admin", "user": h_user},
            ],
            "contexts": [
                {"name": "broken", "context": {"cluster": "broken", "user": "broken-admin"}},
                {"name": "forbidden", "context": {"cluster": "forbidden", "user": "stranger"}},
                {"name": "healthy", "context": {"cluster": "healthy", "user": "healthy-admin"}},
            ]
        });
        files.write("kubeconfig", &serde_json::to_string(&doc).unwrap());
        Fleet {
            broken,
            forbidden,
            healthy,
            files,
        }
    }

    fn kubeconfig(&self) -> String {
        self.files.path().join("kubeconfig").display().to_string()
    }

    /// `SUBCOMMAND --kubeconfig K --window 0 …ARGS`, with the healthy cluster's backends reachable
    /// (the broken cluster has no Service of that name, so the addresses cannot mislead it).
    async fn run(&self, subcommand: &str, args: &[&str]) -> crate::util::Run {
        let mut all: Vec<String> = vec![
            "--kubeconfig".into(),
            self.kubeconfig(),
            "--window".into(),
            "0".into(),
            "--request-timeout".into(),
            "5s".into(),
            "--timeout".into(),
            "30s".into(),
        ];
        for (svc, backend) in [
            ("api.wardle-system", "wardle"),
            ("policy.webhooks", "policy-webhook"),
        ] {
            all.push("--backend-address".into());
            all.push(format!(
                "{svc}=127.0.0.1:{}",
                self.healthy.backend_port(backend).unwrap()
            ));
        }
        all.extend(args.iter().map(|s| s.to_string()));
        extpath_run(&self.files, subcommand, all).await.0
    }

    async fn shutdown(self) {
        self.broken.shutdown().await;
        self.forbidden.shutdown().await;
        self.healthy.shutdown().await;
    }

    /// The table with what changes from run to run replaced: the servers' ephemeral ports (by the
    /// context names) and timestamps (the collection's, certificates' validity from today).
    fn stable(&self, text: &str) -> String {
        let text = text
            .replace(&self.broken.url(), "https://broken.example")
            .replace(&self.forbidden.url(), "https://forbidden.example")
            .replace(&self.healthy.url(), "https://healthy.example");
        redact_timestamps(&text)
    }
}

/// `2026-12-07T01:55:36.51756253Z` → `TIMESTAMP`.
fn redact_timestamps(text: &str) -> String {
    let b = text.as_bytes();
    let shape = |i: usize| -> Option<usize> {
        let d = |j: usize| b.get(i + j).is_some_and(u8::is_ascii_digit);
        let c = |j: usize, ch: u8| b.get(i + j) == Some(&ch);
        if !(d(0) && d(1) && d(2) && d(3) && c(4, b'-') && d(5) && d(6) && c(7, b'-'))
            || !(d(8) && d(9) && c(10, b'T'))
        {
            return None;
        }
        let mut j = 11;
        while b
            .get(i + j)
            .is_some_and(|x| x.is_ascii_digit() || *x == b':' || *x == b'.')
        {
            j += 1;
        }
        c(j, b'Z').then_some(j + 1)
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if let Some(len) = shape(i) {
            out.push_str("TIMESTAMP");
            i += len;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn cluster<'a>(d: &'a Value, context: &str) -> &'a Value {
    d["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["context"] == context)
        .unwrap_or_else(|| panic!("no cluster {context} in {d:#}"))
}

fn class_of(c: &Value, kind: &str, name: &str) -> String {
    c["verdicts"]
        .as_array()
        .unwrap_or_else(|| panic!("no verdicts in {c:#}"))
        .iter()
        .find(|v| v["subject"]["kind"] == kind && v["subject"]["name"] == name)
        .unwrap_or_else(|| panic!("no verdict for {kind}/{name}"))["class"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Each cluster's part of a fleet document: (context, exit code, APIService class or the error).
fn rows(d: &Value) -> Vec<(String, u64, String)> {
    d["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let what = match c["error"].as_str() {
                Some(_) => "not collected".to_string(),
                None => class_of(c, "APIService", "v1alpha1.wardle.example.com"),
            };
            (
                c["context"].as_str().unwrap().to_string(),
                c["exit_code"].as_u64().unwrap(),
                what,
            )
        })
        .collect()
}

fn check_fleet_document(f: &Fleet, d: &Value) {
    assert_eq!(d["kind"], "FleetDiagnosis");
    assert_eq!(
        rows(d),
        vec![
            ("broken".to_string(), 1, "Aggregation".to_string()),
            ("forbidden".to_string(), 3, "not collected".to_string()),
            ("healthy".to_string(), 0, "Healthy".to_string()),
        ],
        "{d:#}"
    );
    let broken = cluster(d, "broken");
    assert_eq!(broken["server"], f.broken.url().as_str());
    assert_eq!(broken["kind"], "Diagnosis", "the single-cluster document");
    assert_eq!(broken["summary"]["worst"], "critical");
    let forbidden = cluster(d, "forbidden");
    assert_eq!(forbidden["server"], f.forbidden.url().as_str());
    assert!(
        forbidden["error"]
            .as_str()
            .unwrap()
            .contains("You must be logged in to the server (Unauthorized)"),
        "{forbidden:#}"
    );
    assert!(forbidden.get("verdicts").is_none(), "{forbidden:#}");
    let healthy = cluster(d, "healthy");
    assert_eq!(healthy["server"], f.healthy.url().as_str());
    for v in healthy["verdicts"].as_array().unwrap() {
        assert_eq!(v["class"], "Healthy", "{v:#}");
    }
    assert_eq!(d["summary"]["clusters"], 3);
    assert_eq!(d["summary"]["with_problems"], 2);
    assert_eq!(d["summary"]["not_collected"], 1);
    assert_eq!(d["summary"]["exit_code"], 3);
    let headline = d["summary"]["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("2 of 3 clusters have problems: broken (critical, 1 problem")
            && headline.contains("forbidden (not collected, exit 3)")
            && !headline.contains("healthy"),
        "{headline}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_scans_a_broken_a_forbidden_and_a_healthy_cluster() {
    let f = Fleet::start().await;

    let r = f
        .run(
            "scan",
            &["--context", "broken,forbidden,healthy", "-o", "json"],
        )
        .await;
    assert_eq!(r.code, 3, "the worst cluster's exit code: {}", r.stderr);
    let d: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stderr));
    check_fleet_document(&f, &d);
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::util::repo().join("docs/fleet.schema.json")).unwrap(),
    )
    .unwrap();
    crate::docs::conforms(&d, &schema, &schema, "$")
        .unwrap_or_else(|e| panic!("-o json does not match docs/fleet.schema.json: {e}"));

    // --all-contexts is the same fleet, in the kubeconfig's order; one at a time gives the same.
    let r = f
        .run("scan", &["--all-contexts", "--parallel", "1", "-o", "json"])
        .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    let all: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(rows(&all), rows(&d));

    // Without the cluster that cannot be read, the worst is the broken one's findings.
    let r = f
        .run("scan", &["--context", "healthy,broken", "-o", "json"])
        .await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let two: Value = serde_json::from_str(&r.stdout).unwrap();
    let contexts: Vec<&str> = two["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["context"].as_str().unwrap())
        .collect();
    assert_eq!(contexts, ["healthy", "broken"], "the order given");

    // One name keeps kubectl's meaning: the single-cluster document.
    let r = f.run("scan", &["--context", "healthy", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let one: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(one["kind"], "Diagnosis");

    // A context the kubeconfig does not have is refused before anything is sent.
    let r = f
        .run("scan", &["--context", "broken,nope", "-o", "json"])
        .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no context \"nope\"") && r.stderr.contains("broken, forbidden, healthy"),
        "{}",
        r.stderr
    );

    // The table groups by cluster under the fleet headline.
    let r = f
        .run("scan", &["--context", "broken,forbidden,healthy"])
        .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    insta::assert_snapshot!("fleet_table", f.stable(&r.stdout));

    // JUnit: one suite per cluster under one root; the unreachable one is an error.
    let r = f
        .run(
            "scan",
            &["--context", "broken,forbidden,healthy", "-o", "junit"],
        )
        .await;
    let suites: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("<testsuite "))
        .collect();
    assert_eq!(suites.len(), 3, "{}", r.stdout);
    assert!(suites[0].contains(r#"name="broken""#) && suites[0].contains(r#"errors="0""#));
    assert!(suites[1].contains(r#"name="forbidden""#) && suites[1].contains(r#"errors="1""#));
    assert!(suites[2].contains(r#"name="healthy""#) && suites[2].contains(r#"failures="0""#));
    assert_eq!(r.stdout.matches("<testsuites ").count(), 1);

    // Markdown: one section per cluster.
    let r = f
        .run(
            "scan",
            &["--context", "broken,forbidden,healthy", "-o", "markdown"],
        )
        .await;
    for c in ["broken", "forbidden", "healthy"] {
        assert!(
            r.stdout.contains(&format!("\n## Cluster {c}\n")),
            "{}",
            r.stdout
        );
    }
    assert!(
        r.stdout.contains("\n## extpath diagnosis\n")
            && !r.stdout.lines().any(|l| l == "# extpath diagnosis"),
        "each cluster's document sits one heading level down: {}",
        r.stdout
    );
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_collected_to_a_directory_analyses_to_the_same_verdicts() {
    let f = Fleet::start().await;
    let dir = f.files.path().join("fleet-bundle");
    let dir_s = dir.display().to_string();
    let r = f
        .run(
            "collect",
            &[
                "--context",
                "broken,forbidden,healthy",
                "--output-dir",
                &dir_s,
            ],
        )
        .await;
    assert_eq!(
        r.code, 3,
        "one context could not be collected: {}",
        r.stderr
    );
    for file in ["fleet.yaml", "broken.yaml", "healthy.yaml"] {
        assert!(dir.join(file).is_file(), "{file}: {}", r.stderr);
    }
    assert!(!dir.join("forbidden.yaml").exists());
    let index: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("fleet.yaml")).unwrap()).unwrap();
    assert_eq!(index["kind"], "FleetBundle");
    assert_eq!(index["clusters"][1]["exit_code"], 3);

    let scanned = f
        .run(
            "scan",
            &["--context", "broken,forbidden,healthy", "-o", "json"],
        )
        .await;
    let analyze = |args: Vec<String>| extpath_run(&f.files, "analyze", args);
    let (analyzed, _) = analyze(vec![dir_s.clone(), "-o".into(), "json".into()]).await;
    assert_eq!(analyzed.code, 3, "{}", analyzed.stderr);
    let a: Value = serde_json::from_str(&analyzed.stdout).unwrap();
    check_fleet_document(&f, &a);
    let s: Value = serde_json::from_str(&scanned.stdout).unwrap();
    let verdicts = |d: &Value| -> Vec<(String, String, String, String)> {
        let mut out = Vec::new();
        for c in d["clusters"].as_array().unwrap() {
            for v in c["verdicts"].as_array().into_iter().flatten() {
                out.push((
                    c["context"].as_str().unwrap().to_string(),
                    v["subject"]["kind"].as_str().unwrap().to_string(),
                    v["subject"]["name"].as_str().unwrap().to_string(),
                    v["class"].as_str().unwrap().to_string(),
                ));
            }
        }
        out.sort();
        out
    };
    assert_eq!(verdicts(&a), verdicts(&s));

    // Several contexts without a directory is a usage error; a bundle that does not load names
    // its file.
    let r = f.run("collect", &["--context", "broken,healthy"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--output-dir"), "{}", r.stderr);
    std::fs::write(dir.join("broken.yaml"), "kind: [").unwrap();
    let (r, _) = analyze(vec![dir_s.clone()]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("broken.yaml"), "{}", r.stderr);
    f.shutdown().await;
}

/// A cluster whose API server knows the scanning identity but whose RBAC lets it read nothing
/// (authenticated, every list forbidden) is its own row: its exit code is that of a collection
/// that read none of the core sources — never green. A cluster whose port refuses connections is
/// its own row with exit 3. The healthy cluster beside them keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_forbidden_by_rbac_or_gone_are_rows_of_their_own() {
    let text = std::fs::read_to_string(crate::util::repo().join("fixtures/scenarios/healthy.yaml"))
        .unwrap()
        .replacen(
            "users:\n",
            "users:\n  - name: nobody\n    token: nobody-token\n    allow: []\n",
            1,
        );
    assert!(text.contains("nobody-token"), "the scenario's users moved");
    let unpermitted = start_text(&text).await;
    let fleet = Fleet::start().await;
    let kc: Value = serde_saphyr::from_str(&unpermitted.kubeconfig(ClientAuth::Token)).unwrap();
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fleet.files.path().join("kubeconfig")).unwrap(),
    )
    .unwrap();
    doc["clusters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "unpermitted", "cluster": kc["clusters"][0]["cluster"]}));
    doc["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "nobody", "user": {"token": "nobody-token"}}));
    doc["contexts"].as_array_mut().unwrap().push(
        json!({"name": "unpermitted", "context": {"cluster": "unpermitted", "user": "nobody"}}),
    );
    // And a cluster that is gone: its port refuses connections.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("https://{}", closed.local_addr().unwrap());
    drop(closed);
    let mut gone_cluster = kc["clusters"][0]["cluster"].clone();
    gone_cluster["server"] = json!(gone);
    doc["clusters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "gone", "cluster": gone_cluster}));
    doc["contexts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "gone", "context": {"cluster": "gone", "user": "nobody"}}));
    fleet
        .files
        .write("kubeconfig", &serde_json::to_string(&doc).unwrap());
    let r = fleet
        .run(
            "scan",
            &["--context", "healthy,unpermitted,gone", "-o", "json"],
        )
        .await;
    let d: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stderr));
    let healthy = cluster(&d, "healthy");
    assert_eq!(healthy["exit_code"], 0, "{healthy:#}");
    let row = cluster(&d, "unpermitted");
    // /version and the health endpoints stay readable to any authenticated user, so this is a
    // collection that read no core source (exit 1, an Inconclusive critical verdict), not one that
    // read nothing at all (exit 3).
    assert_eq!(row["exit_code"], 1, "{row:#}");
    assert!(
        row["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["class"] == "Inconclusive" && v["severity"] == "critical"),
        "a collection that read no core source says so: {row:#}"
    );
    let gone_row = cluster(&d, "gone");
    assert_eq!(gone_row["exit_code"], 3, "{gone_row:#}");
    assert!(gone_row.get("verdicts").is_none(), "{gone_row:#}");
    assert_eq!(r.code, 3, "the run's exit code is the worst: {}", r.stderr);
    fleet.shutdown().await;
    unpermitted.shutdown().await;
}
