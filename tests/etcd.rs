//! `--etcd-metrics-url` against a real etcd (Debian's `etcd-server`, 3.4 here; `.ci/run` installs
//! it), with the reference server as the API server it belongs to: healthy over mutual TLS, stopped
//! with SIGSTOP, and out of space with the NOSPACE alarm raised.
//!
//! Every test builds its command line with [`args`] and runs it with [`extpath_run`], so once
//! `scan` exists the same arguments give a verdict to assert on in one line.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use extpath::pki::generate::{LeafSpec, TestCa, Validity};
use extpath::refserver::{ClientAuth, RunningServer};
use serde_json::{Value, json};

use crate::util::daemons::{Daemon, dir, free_ports, write};
use crate::util::{Files, extpath_run, gaps, start_text};

/// The API server whose etcd the test's etcd plays: nothing extended, so every gap and every
/// unhealthy check in a bundle is etcd's.
const CLUSTER: &str = r#"
apiVersion: extpath.dev/v1alpha1
kind: Scenario
name: etcd-source
description: a cluster with nothing extended; its etcd is the test's real etcd
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: demo}}
"#;

/// Certificates for an etcd with `--client-cert-auth`.
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

impl Pki {
    fn new() -> Self {
        // etcd checks validity against the real clock, so these are valid around now.
        let validity = Validity::around(jiff::Timestamp::now(), 1, 30);
        let ca = TestCa::new("etcd-ca", validity).unwrap();
        // etcd's gRPC gateway dials etcd itself with the serving certificate, so under
        // --client-cert-auth that certificate must be good for client auth too (as kubeadm's is).
        let server = ca
            .issue(&LeafSpec {
                client_auth: true,
                ..LeafSpec::server(&["127.0.0.1", "localhost"], validity)
            })
            .unwrap();
        let client = ca
            .issue(&LeafSpec::client(
                "kube-apiserver-etcd-client",
                &[],
                validity,
            ))
            .unwrap();
        Pki {
            ca: ca.cert_pem.clone(),
            server: (server.cert_pem, server.key_pem),
            client: (client.cert_pem, client.key_pem),
        }
    }
}

/// A real etcd on ephemeral ports.
struct Etcd {
    daemon: Daemon,
    /// `http(s)://127.0.0.1:PORT`.
    url: String,
    /// Client files when TLS is on: (ca, cert, key).
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
    http: reqwest::Client,
}

impl Etcd {
    async fn start(pki: Option<&Pki>, quota_backend_bytes: Option<u64>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let d = dir();
        let [client_port, peer_port] = free_ports();
        let scheme = if pki.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let mut args: Vec<String> = [
            "--name",
            "extpath-test",
            "--data-dir",
            d.path().join("data").to_str().unwrap(),
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--initial-cluster",
            &format!("extpath-test={peer}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(q) = quota_backend_bytes {
            args.extend(["--quota-backend-bytes".into(), q.to_string()]);
        }
        let mut http = reqwest::Client::builder()
            .tls_backend_rustls()
            .no_proxy()
            .timeout(Duration::from_secs(2));
        let tls = pki.map(|pki| {
            let ca = write(d.path(), "ca.crt", &pki.ca);
            let server_cert = write(d.path(), "server.crt", &pki.server.0);
            let server_key = write(d.path(), "server.key", &pki.server.1);
            let cert = write(d.path(), "client.crt", &pki.client.0);
            let key = write(d.path(), "client.key", &pki.client.1);
            args.extend([
                "--cert-file".into(),
                server_cert.display().to_string(),
                "--key-file".into(),
                server_key.display().to_string(),
                "--client-cert-auth".into(),
                "--trusted-ca-file".into(),
                ca.display().to_string(),
            ]);
            (ca, cert, key)
        });
        if let Some(pki) = pki {
            http = http
                .tls_certs_only([reqwest::Certificate::from_pem(pki.ca.as_bytes()).unwrap()])
                .identity(
                    reqwest::Identity::from_pem(
                        format!("{}\n{}", pki.client.0, pki.client.1).as_bytes(),
                    )
                    .unwrap(),
                );
        }
        let mut etcd = Etcd {
            daemon: Daemon::start("etcd", "etcd", &args, d),
            url,
            tls,
            http: http.build().unwrap(),
        };
        let (http, health) = (etcd.http.clone(), format!("{}/health", etcd.url));
        etcd.daemon
            .wait_until(Duration::from_secs(20), || {
                let (http, health) = (http.clone(), health.clone());
                async move { healthy(&http, &health).await }
            })
            .await;
        etcd
    }

    fn target(&self) -> String {
        self.url.split("://").nth(1).unwrap().to_string()
    }

    /// One write through the v3 gateway; etcd's answer.
    async fn put(&self, key: &str, value: &[u8]) -> Value {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        self.http
            .post(format!("{}/v3/kv/put", self.url))
            .json(&json!({"key": b64(key.as_bytes()), "value": b64(value)}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn is_healthy(&self) -> bool {
        healthy(&self.http, &format!("{}/health", self.url)).await
    }
}

async fn healthy(http: &reqwest::Client, url: &str) -> bool {
    match http.get(url).send().await {
        Ok(r) => r.json::<Value>().await.is_ok_and(|v| v["health"] == "true"),
        Err(_) => false,
    }
}

/// The command line after the subcommand: the reference server as API server, `etcd` as its etcd.
fn args(kubeconfig: &std::path::Path, etcd: &Etcd, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "-o".into(),
        "json".into(),
        "--etcd-metrics-url".into(),
        format!("{}/metrics", etcd.url),
    ];
    if let Some((ca, cert, key)) = &etcd.tls {
        for (flag, p) in [
            ("--etcd-ca", ca),
            ("--etcd-cert", cert),
            ("--etcd-key", key),
        ] {
            a.extend([flag.to_string(), p.display().to_string()]);
        }
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn source<'a>(b: &'a Value, target: &str) -> Option<&'a Value> {
    b["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["target"] == target)
}

fn family<'a>(source: &'a Value, name: &str) -> &'a Value {
    source["families"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no family {name}"))
}

fn etcd_checks(b: &Value) -> Vec<&Value> {
    b["health_checks"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .filter(|h| h["endpoint"] == "etcd_health")
                .collect()
        })
        .unwrap_or_default()
}

fn etcd_gaps(b: &Value) -> Vec<(String, String)> {
    gaps(b)
        .into_iter()
        .filter(|(s, _)| s.contains("etcd"))
        .collect()
}

async fn cluster(f: &Files) -> (RunningServer, PathBuf) {
    let server = start_text(CLUSTER).await;
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    (server, kc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_etcd_over_mutual_tls_is_read_in_the_apiservers_window() {
    let pki = Pki::new();
    let etcd = std::sync::Arc::new(Etcd::start(Some(&pki), None).await);
    let f = Files::new();
    let (server, kc) = cluster(&f).await;

    // Writes while the window runs, so that the WAL fsync histogram moves within it.
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (etcd, writing) = (etcd.clone(), writing.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                let r = etcd.put(&format!("/registry/k{n}"), b"v").await;
                assert!(r.get("error").is_none(), "{r}");
                n += 1;
            }
            n
        })
    };
    let (r, _) = extpath_run(&f, "collect", args(&kc, &etcd, &["--window", "1s"])).await;
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.await.unwrap() > 0);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert!(gaps(&b).is_empty(), "{:?}", gaps(&b));

    let api = source(&b, "apiserver").expect("the API server's metrics");
    let m = source(&b, "etcd").expect("etcd's metrics");
    assert_eq!(m["origin"], format!("{}/metrics", etcd.url));
    // Scraped in the same rounds as the API server: the windows cover the same period.
    let at = |v: &Value| v.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    for edge in ["start", "end"] {
        let apart = (at(&m["window"][edge]) - at(&api["window"][edge]))
            .abs()
            .total(jiff::Unit::Millisecond)
            .unwrap();
        assert!(apart < 500.0, "{edge}s {apart} ms apart");
    }
    assert_eq!(
        family(m, "etcd_server_has_leader")["series"][0]["value"],
        1.0
    );
    let changes = family(m, "etcd_server_leader_changes_seen_total");
    assert_eq!(changes["type"], "counter");
    assert_eq!(changes["series"][0]["window"]["delta"], 0.0, "{changes}");
    let fsync = family(m, "etcd_disk_wal_fsync_duration_seconds");
    assert_eq!(fsync["type"], "histogram");
    let fsyncs_in_window = fsync["series"][0]["window"]["count_delta"]
        .as_f64()
        .unwrap();
    assert!(fsyncs_in_window > 0.0, "{fsync}");
    for name in [
        "etcd_disk_backend_commit_duration_seconds",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_server_quota_backend_bytes",
        "etcd_server_proposals_failed_total",
    ] {
        family(m, name);
    }

    let checks = etcd_checks(&b);
    assert_eq!(checks.len(), 2, "{checks:?}");
    for c in &checks {
        assert_eq!(c["ok"], true, "{c}");
        assert_eq!(c["target"], etcd.target());
    }
    assert_eq!(checks[0]["origin"], format!("{}/health", etcd.url));
    assert_eq!(
        checks[1]["origin"],
        format!("{}/v3/maintenance/alarm", etcd.url)
    );
    assert!(!r.stdout.contains("PRIVATE KEY"));

    // Without the client certificate etcd refuses the handshake: gaps, not a failed run.
    let (ca, _, _) = etcd.tls.clone().unwrap();
    let no_identity = vec![
        "--kubeconfig".to_string(),
        kc.display().to_string(),
        "-o".into(),
        "json".into(),
        "--window".into(),
        "0".into(),
        "--etcd-metrics-url".into(),
        etcd.url.clone(),
        "--etcd-ca".into(),
        ca.display().to_string(),
    ];
    let (r, _) = extpath_run(&f, "collect", no_identity).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    let mut g = etcd_gaps(&b);
    g.sort();
    assert_eq!(
        g,
        [
            ("health/etcd".to_string(), "unreachable".to_string()),
            ("health/etcd/alarms".into(), "unreachable".into()),
            ("metrics/etcd".into(), "unreachable".into()),
        ]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_etcd_is_a_timeout_gap_never_a_hang() {
    let etcd = Etcd::start(None, None).await;
    let f = Files::new();
    let (server, kc) = cluster(&f).await;

    etcd.daemon.signal("STOP");
    let (r, took) = extpath_run(
        &f,
        "collect",
        args(&kc, &etcd, &["--window", "1s", "--request-timeout", "1s"]),
    )
    .await;
    etcd.daemon.signal("CONT");
    assert_eq!(r.code, 0, "{}", r.stderr);
    // One request timeout (etcd's three requests run at once, beside the API server's window)
    // and the window, plus process start: far below what a hang would take.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let b = r.bundle();
    let mut g = etcd_gaps(&b);
    g.sort();
    assert_eq!(
        g,
        [
            ("health/etcd".to_string(), "timeout".to_string()),
            ("health/etcd/alarms".into(), "timeout".into()),
            ("metrics/etcd".into(), "timeout".into()),
        ]
    );
    assert!(source(&b, "etcd").is_none());
    assert!(etcd_checks(&b).is_empty());
    // The API server's side was collected whole meanwhile.
    assert!(
        source(&b, "apiserver").is_some_and(|m| m["window"].is_object()),
        "{}",
        b["gaps"]
    );
    assert_eq!(gaps(&b).len(), 3, "{:?}", gaps(&b));

    // It was stopped, not dead: it answers again once continued.
    let mut etcd = etcd;
    let (http, health) = (etcd.http.clone(), format!("{}/health", etcd.url));
    etcd.daemon
        .wait_until(Duration::from_secs(10), || {
            let (http, health) = (http.clone(), health.clone());
            async move { healthy(&http, &health).await }
        })
        .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_etcd_raises_nospace_and_the_bundle_names_it() {
    // 1 MiB: tiny, so that a handful of 64 KiB writes exhaust it.
    const QUOTA: u64 = 1 << 20;
    let etcd = Etcd::start(None, Some(QUOTA)).await;
    let value = vec![b'x'; 64 * 1024];
    let mut refused = None;
    for n in 0..64 {
        let r = etcd
            .put(&format!("/registry/configmaps/demo/cm-{n}"), &value)
            .await;
        if let Some(e) = r.get("error") {
            refused = Some(e.as_str().unwrap_or_default().to_string());
            break;
        }
    }
    assert_eq!(
        refused.as_deref(),
        Some("etcdserver: mvcc: database space exceeded"),
        "64 writes of 64 KiB fit in a 1 MiB quota?"
    );
    assert!(!etcd.is_healthy().await);

    let f = Files::new();
    let (server, kc) = cluster(&f).await;
    let (r, _) = extpath_run(&f, "collect", args(&kc, &etcd, &["--window", "0"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert!(gaps(&b).is_empty(), "{:?}", gaps(&b));

    let checks = etcd_checks(&b);
    let health = checks
        .iter()
        .find(|c| c["origin"].as_str().unwrap().ends_with("/health"))
        .unwrap();
    assert_eq!(health["ok"], false, "{health}");
    let alarms = checks
        .iter()
        .find(|c| {
            c["origin"]
                .as_str()
                .unwrap()
                .ends_with("/v3/maintenance/alarm")
        })
        .unwrap();
    assert_eq!(alarms["ok"], false);
    assert_eq!(alarms["error"], "alarms raised: NOSPACE");
    assert_eq!(alarms["checks"][0]["name"], "alarm NOSPACE");
    assert_eq!(alarms["checks"][0]["ok"], false);
    assert!(
        alarms["checks"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("raised on member "),
        "{alarms}"
    );

    // Size against quota, for a rule that says how full it is.
    let m = source(&b, "etcd").unwrap();
    let gauge = |name: &str| family(m, name)["series"][0]["value"].as_f64().unwrap();
    assert_eq!(gauge("etcd_server_quota_backend_bytes"), QUOTA as f64);
    // etcd refuses the write that would not fit, so the file ends within one write of the quota.
    let size = gauge("etcd_mvcc_db_total_size_in_bytes");
    assert!(size > (QUOTA - 2 * value.len() as u64) as f64, "{size}");
    server.shutdown().await;
}
