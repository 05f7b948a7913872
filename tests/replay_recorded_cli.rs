//! A replayed recording against real clients: kubectl reads it as a cluster (APIServices with their
//! recorded conditions, the recorded 503 and body of an aggregated path, the recorded health
//! checks), collection's health parser reads every shape of check back, promtool accepts the
//! replayed `/metrics`, and `replay serve --bundle` then `scan` with
//! the flags it prints (`--merge` of the carried evidence among them) judges the recording as
//! `analyze` does. Bad input is one line naming the file, exit 2, before anything is contacted.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use extpath::bundle::raw::import_paths;
use extpath::refserver::{ClientAuth, RefServer, StartOptions};
use serde_json::Value;

use crate::util::{extpath, repo};

/// The real kubectl, or None (skipped visibly) — but a failure when CI is set.
fn have(tool: &str, version_args: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(version_args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is not on PATH but CI is set"
        );
        eprintln!("SKIPPED: {tool} is not on PATH");
    }
    ok
}

fn kubectl(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", config)
        .env("HOME", config.parent().unwrap())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_a_replayed_capture_as_recorded() {
    if !have("kubectl", &["version", "--client"]) {
        return;
    }
    let case = repo().join("fixtures/raw/01-server-down-settled");
    let recording = import_paths(&[case]).unwrap();
    let wardle = recording
        .api_service("v1alpha1.wardle.example.com")
        .unwrap()
        .available()
        .unwrap()
        .clone();
    let recorded_count = recording.api_services.len();
    let server = RefServer::replay(recording, StartOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    std::fs::write(&config, server.kubeconfig(ClientAuth::Token)).unwrap();
    let cfg = config.clone();
    let (get, raw, readyz) = tokio::task::spawn_blocking(move || {
        (
            kubectl(&cfg, &["get", "apiservices"]),
            kubectl(
                &cfg,
                &["get", "--raw", "/apis/wardle.example.com/v1alpha1", "-v8"],
            ),
            kubectl(&cfg, &["get", "--raw", "/readyz?verbose"]),
        )
    })
    .await
    .unwrap();
    server.shutdown().await;

    let (ok, out, err) = get;
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("v1alpha1.wardle.example.com"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains(&format!("{} ({})", wardle.status, wardle.reason)),
        "{row}"
    );
    assert_eq!(out.lines().count(), recorded_count + 1, "{out}");

    // The recorded answer of the aggregated path: 503 and the aggregator's body.
    let (ok, _, err) = raw;
    assert!(!ok);
    assert!(err.contains("503 Service Unavailable"), "{err}");
    // kubectl recorded the Status it made from the aggregator's plain-text body; the replay gives
    // back that body, and kubectl makes the same Status again.
    assert!(err.contains(r#"body="service unavailable""#), "{err}");
    assert!(
        err.contains("the server is currently unable to handle the request"),
        "{err}"
    );

    let (ok, out, err) = readyz;
    assert!(ok, "{err}");
    assert!(
        out.contains("[+]etcd ok") && out.ends_with("readyz check passed\n"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_replayed_metrics() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let case = repo().join("fixtures/raw/00-healthy");
    let server = RefServer::replay(import_paths(&[case]).unwrap(), StartOptions::default())
        .await
        .unwrap();
    let client = kube::Client::new(server.service(), "default");
    let metrics = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    server.shutdown().await;
    assert!(metrics.contains("# TYPE apiserver_request_total counter"));
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // 3 is lint only (kube-apiserver's own names trip it); 1 would be a parse failure.
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "promtool: {report}"
    );
}

/// A `replay serve` child, stopped (by its own pid) when dropped.
struct Serving {
    child: std::process::Child,
    kubeconfig: PathBuf,
    flags: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `replay serve ARGS` and read what it prints up to "press Ctrl-C".
fn serve(args: &[&str]) -> Serving {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("kubectl-extpath"))
        .current_dir(repo())
        .args(["replay", "serve"])
        .args(args)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut flags = Vec::new();
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("flags for scan/collect: ") {
            flags = rest.split(' ').map(str::to_string).collect();
        }
        if line.starts_with("press Ctrl-C") {
            break;
        }
    }
    Serving {
        child,
        kubeconfig,
        flags,
        _dir: dir,
    }
}

fn verdicts(doc: &Value) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                format!("{}/{}", v["subject"]["kind"], v["subject"]["name"]),
                v["class"].to_string(),
                v["severity"].to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn scan_of_a_replayed_bundle_with_its_carried_evidence_judges_it_as_analyze_does() {
    // agg-tls: every verdict rests on evidence a replay carries (served chains, client output)
    // beside what it serves (APIServices, caBundles) — and the scan must find it merged.
    let bundle = "fixtures/bundles/agg-tls.yaml";
    let serving = serve(&["--bundle", bundle]);
    assert!(
        serving.flags.iter().any(|f| f == "--merge"),
        "{:?}",
        serving.flags
    );
    let scan = extpath()
        .current_dir(repo())
        .args(["scan", "-o", "json", "--kubeconfig"])
        .arg(&serving.kubeconfig)
        .args(serving.flags.iter())
        .output()
        .unwrap();
    let analyze = extpath()
        .current_dir(repo())
        .args(["analyze", bundle, "-o", "json"])
        .output()
        .unwrap();
    drop(serving);
    let scanned: Value = serde_json::from_slice(&scan.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&scan.stderr)));
    let analyzed: Value = serde_json::from_slice(&analyze.stdout).unwrap();
    assert_eq!(verdicts(&scanned), verdicts(&analyzed));
    assert_eq!(scan.status.code(), analyze.status.code());
}

#[test]
fn a_bad_recording_or_merge_file_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: extpath.dev/v1alpha1\nkind: Nope\n").unwrap();
    let out = extpath()
        .args(["replay", "serve", "--bundle"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.yaml"), "{err}");

    // --merge is read before anything is contacted: no server at that address matters.
    let out = extpath()
        .args(["collect", "--server", "https://127.0.0.1:1", "--merge"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.yaml"), "{err}");

    let out = extpath()
        .args(["replay", "serve", "--raw"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
}

#[test]
fn recorded_health_checks_read_back_as_recorded() {
    use extpath::bundle::observations::HealthEndpoint;
    use extpath::bundle::{HealthCheck, HealthCheckItem};
    use extpath::collect::health::parse_verbose;
    use extpath::refserver::recorded::endpoints::health_text;
    let item = |name: &str, ok: bool, reason: Option<&str>| HealthCheckItem {
        name: name.into(),
        ok,
        reason: reason.map(str::to_string),
    };
    let check = |ok: bool, checks: Vec<HealthCheckItem>, error: Option<&str>| HealthCheck {
        endpoint: HealthEndpoint::ApiserverReadyz,
        ok,
        checks,
        error: error.map(str::to_string),
        target: None,
        origin: None,
        component: Some(extpath::bundle::observations::Component::KubeApiserver),
    };
    for c in [
        check(
            false,
            vec![
                item("ping", true, None),
                item("etcd", false, Some("reason withheld")),
                item("poststarthook/x", false, None),
            ],
            None,
        ),
        check(true, vec![item("ping", true, None)], None),
        check(true, vec![], None),
        check(false, vec![], Some("etcd took too long")),
    ] {
        let (code, text) = health_text(&c, "readyz", true);
        assert_eq!(parse_verbose(c.endpoint, code, &text), c, "{text}");
    }
}
