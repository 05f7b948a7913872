//! `--prometheus` against a real Prometheus (Debian's `prometheus`, 2.42 here; `.ci/run` installs
//! it) that scrapes the reference server — its API server over HTTPS with the server's CA and a
//! bearer token, and its etcd-style `/metrics` — every second. The same period is collected both
//! ways: directly, with a two-scrape `--window`, and from Prometheus with `--since` set to that
//! window's length and `--until` to its end. Families and series must be the same; rates must
//! agree within [`RELATIVE`] (plus [`EVENTS`] for sparse series). Why a tolerance at all:
//!
//! * Alignment. Prometheus' samples are 1 s apart and fall anywhere in the window, so
//!   `increase()` sees the counter from its first sample after the window opens to its last before
//!   it closes — up to two scrape intervals less than the window — and extrapolates that to the
//!   whole window (proportionally, as long as the gap to each edge is under 1.1 intervals). The
//!   direct scrapes measure exactly the window.
//! * Extrapolation therefore assumes the rate was the same in the unseen edges. The traffic here is
//!   driven at a steady pace, but it is real traffic on a 2-core machine shared with builds: a
//!   second can hold a few more or fewer requests than the next.
//!
//! With a 4 s window and 1 s scrapes the unseen edges are at most 2 s of 4: a 15 % swing of the rate
//! inside them moves the extrapolated increase by at most 7.5 %; [`RELATIVE`] is 10 %. (Measured
//! on the driven series: under 1 % apart.)
//! Sparse series (a handful of requests in the window, such as the collection's own) can lose or
//! gain an event at each edge, which is what [`EVENTS`] allows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use extpath::refserver::{ClientAuth, RunningServer};
use serde_json::Value;

use crate::util::daemons::{Daemon, dir, free_ports, write};
use crate::util::repo;
use crate::util::{Files, extpath_run, gaps, start_text};

/// Relative agreement of rates between direct scraping and Prometheus (see the module doc).
const RELATIVE: f64 = 0.10;
/// Absolute agreement, in events over the window, for sparse series.
const EVENTS: f64 = 3.0;
/// The direct window.
const WINDOW: &str = "4s";

/// apf-saturation (a flooder whose burst of lists gets 429s) with an etcd `/metrics` as well, so
/// that both targets are in Prometheus.
fn scenario() -> String {
    let text =
        std::fs::read_to_string(repo().join("fixtures/scenarios/apf-saturation.yaml")).unwrap();
    text.replace(
        "faults:\n",
        "faults:\n  etcd: {walFsyncSeconds: [0.004, 0.02], hasLeader: 1, leaderChanges: 2, \
         dbSizeBytes: 5000000, quotaBackendBytes: 8589934592}\n",
    )
}

/// A real Prometheus on an ephemeral port, killed on drop (also used by `exporter`).
pub(crate) struct Prometheus {
    daemon: Daemon,
    pub(crate) url: String,
    http: reqwest::Client,
}

impl Prometheus {
    async fn start(server: &RunningServer) -> Self {
        let d = dir();
        let ca = write(d.path(), "ca.crt", server.ca_pem());
        let token = write(d.path(), "token", server.admin_token());
        let etcd = server.etcd_url().unwrap();
        let config = format!(
            r#"
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: apiserver
    scheme: https
    tls_config: {{ca_file: {ca}}}
    authorization: {{credentials_file: {token}}}
    static_configs: [{{targets: ["{api}"]}}]
  - job_name: etcd
    static_configs: [{{targets: ["{etcd}"]}}]
"#,
            ca = ca.display(),
            token = token.display(),
            api = server.addr(),
            etcd = etcd.trim_start_matches("http://"),
        );
        Prometheus::start_with(d, &config).await
    }

    /// Start Prometheus with this configuration file's text, in `d`.
    pub(crate) async fn start_with(d: tempfile::TempDir, config: &str) -> Self {
        let config = write(d.path(), "prometheus.yml", config);
        let [port] = free_ports();
        let args: Vec<String> = vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", d.path().join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            // Nothing here reaches outside 127.0.0.1: no remote storage, no alerting, no
            // service discovery but the static targets above.
            "--log.level=warn".into(),
        ];
        let mut p = Prometheus {
            daemon: Daemon::start("prometheus", "prometheus", &args, d),
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
        };
        let (http, ready) = (p.http.clone(), format!("{}/-/ready", p.url));
        p.daemon
            .wait_until(Duration::from_secs(30), || {
                let (http, ready) = (http.clone(), ready.clone());
                async move {
                    http.get(&ready)
                        .send()
                        .await
                        .is_ok_and(|r| r.status().is_success())
                }
            })
            .await;
        p
    }

    /// Poll until `query` is at least `at_least`.
    pub(crate) async fn wait_for(&mut self, query: &str, at_least: f64) {
        let (http, url) = (&self.http, &self.url);
        self.daemon
            .wait_until(Duration::from_secs(30), || async move {
                value(http, url, query).await.is_some_and(|v| v >= at_least)
            })
            .await;
    }

    /// Poll until `ready` holds for the first element's value of `query` (None: no result).
    pub(crate) async fn wait_until(&mut self, query: &str, ready: impl Fn(Option<f64>) -> bool) {
        let (http, url, ready) = (&self.http, &self.url, &ready);
        self.daemon
            .wait_until(Duration::from_secs(60), || async move {
                ready(value(http, url, query).await)
            })
            .await;
    }

    /// The value of `query` now (its first element), if any.
    pub(crate) async fn value(&self, query: &str) -> Option<f64> {
        value(&self.http, &self.url, query).await
    }

    /// The result vector of `query` now, as Prometheus' API returns it.
    pub(crate) async fn vector(&self, query: &str) -> Vec<Value> {
        let r: Value = self
            .http
            .get(format!(
                "{}/api/v1/query?query={}",
                self.url,
                extpath::collect::fetch::urlencode(query)
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// The value of a PromQL expression now (its first element), if any.
async fn value(http: &reqwest::Client, url: &str, query: &str) -> Option<f64> {
    let r = http
        .get(format!(
            "{url}/api/v1/query?query={}",
            extpath::collect::fetch::urlencode(query)
        ))
        .send()
        .await
        .ok()?
        .json::<Value>()
        .await
        .ok()?;
    r["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// Steady traffic until dropped: the admin reading a namespace every 20 ms, and the flooder
/// bursting lists into its one-seat priority level every 100 ms (most get 429).
struct Traffic {
    on: Arc<AtomicBool>,
}

impl Traffic {
    fn start(server: &RunningServer) -> Self {
        let on = Arc::new(AtomicBool::new(true));
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(server.ca_pem().as_bytes()).unwrap()])
            .no_proxy()
            .build()
            .unwrap();
        let base = server.url();
        let admin = server.admin_token().to_string();
        let steady = |period: Duration, parallel: usize, token: String, path: &'static str| {
            let (on, http, url) = (on.clone(), http.clone(), format!("{base}{path}"));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while on.load(Ordering::Relaxed) {
                    tick.tick().await;
                    for _ in 0..parallel {
                        let (http, url, token) = (http.clone(), url.clone(), token.clone());
                        tokio::spawn(async move {
                            let _ = http.get(url).bearer_auth(token).send().await;
                        });
                    }
                }
            });
        };
        steady(
            Duration::from_millis(20),
            1,
            admin,
            "/api/v1/namespaces/apf-load",
        );
        steady(
            Duration::from_millis(100),
            3,
            "flooder-token".into(),
            "/api/v1/namespaces/apf-load/configmaps",
        );
        Traffic { on }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.on.store(false, Ordering::Relaxed);
    }
}

type Series = BTreeMap<String, BTreeMap<String, Value>>;

/// family → (labels as JSON) → series, of one target.
fn series_of(bundle: &Value, target: &str) -> Series {
    let source = bundle["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["target"] == target)
        .unwrap_or_else(|| panic!("no {target} metrics: {}", bundle["gaps"]));
    source["families"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let series = f["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    s["type"] = f["type"].clone();
                    // Prometheus keeps no empty-valued label (its data model: empty = absent), so
                    // `group=""` of a direct scrape has no counterpart; series are keyed without.
                    let labels: BTreeMap<&str, &str> = s["labels"]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                                .filter(|(_, v)| !v.is_empty())
                                .collect()
                        })
                        .unwrap_or_default();
                    (serde_json::to_string(&labels).unwrap(), s)
                })
                .collect();
            (f["name"].as_str().unwrap().to_string(), series)
        })
        .collect()
}

fn delta(s: &Value) -> Option<f64> {
    s["window"]["delta"].as_f64()
}

/// Whether two increases over the same window agree within the stated tolerance.
fn agree(direct: f64, prometheus: f64) -> bool {
    (direct - prometheus).abs() <= RELATIVE * direct.max(prometheus) + EVENTS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_gives_the_families_and_rates_of_a_direct_window() {
    let server = start_text(&scenario()).await;
    let mut prom = Prometheus::start(&server).await;
    let traffic = Traffic::start(&server);
    // Every driven series exists, with two samples, before the window opens: a series born
    // inside the window counts from zero in a direct window but from its first sample in
    // Prometheus (that difference is documented, not tested).
    prom.wait_for(
        r#"min(count_over_time(apiserver_flowcontrol_rejected_requests_total{job="apiserver"}[1m]))"#,
        2.0,
    )
    .await;
    prom.wait_for(
        r#"count_over_time(etcd_server_has_leader{job="etcd"}[1m])"#,
        2.0,
    )
    .await;

    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let common = |extra: &[&str]| {
        let mut a = vec![
            "--kubeconfig".to_string(),
            kc.display().to_string(),
            "-o".into(),
            "json".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let etcd_url = server.etcd_url().unwrap();
    let (direct, _) = extpath_run(
        &f,
        "collect",
        common(&["--window", WINDOW, "--etcd-metrics-url", &etcd_url]),
    )
    .await;
    assert_eq!(direct.code, 0, "{}", direct.stderr);
    let direct = direct.bundle();
    // The reference server's etcd endpoint is a metrics listener: /metrics and /health, no v3
    // gateway, so the alarm list is the one thing it cannot give.
    assert_eq!(
        gaps(&direct),
        [("health/etcd/alarms".to_string(), "not_served".to_string())]
    );
    let window = &direct["metrics"][0]["window"];
    let at = |v: &Value| v.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let (start, end) = (at(&window["start"]), at(&window["end"]));
    let since_ms = (end - start)
        .total(jiff::Unit::Millisecond)
        .unwrap()
        .round();

    // Prometheus has scraped past the window's end, so the query at `end` sees the last sample
    // before it.
    prom.wait_for(
        r#"max(timestamp(up{job="apiserver"}))"#,
        end.as_millisecond() as f64 / 1000.0,
    )
    .await;
    drop(traffic);

    let until = end.to_string();
    let since = format!("{since_ms}ms");
    let (from_prom, took) = extpath_run(
        &f,
        "collect",
        common(&[
            "--prometheus",
            &prom.url,
            "--since",
            &since,
            "--until",
            &until,
        ]),
    )
    .await;
    assert_eq!(from_prom.code, 0, "{}", from_prom.stderr);
    // No window to wait for: the rates come from Prometheus' history.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let from_prom = from_prom.bundle();
    assert!(
        crate::util::gaps_beyond_etcd(&from_prom).is_empty(),
        "{:?}",
        gaps(&from_prom)
    );
    assert_eq!(from_prom["metrics"][0]["target"], "apiserver");
    let window = &from_prom["metrics"][0]["window"];
    assert_eq!(at(&window["end"]), end);
    assert!(
        ((end - at(&window["start"]))
            .total(jiff::Unit::Millisecond)
            .unwrap()
            - since_ms)
            .abs()
            < 1.0
    );
    assert_eq!(from_prom["collection"]["metrics_window"], *window);

    for target in ["apiserver", "etcd"] {
        let d = series_of(&direct, target);
        let p = series_of(&from_prom, target);
        assert_eq!(
            d.keys().collect::<BTreeSet<_>>(),
            p.keys().collect::<BTreeSet<_>>(),
            "{target}: the same families"
        );
        for (family, ds) in &d {
            let ps = &p[family];
            assert_eq!(
                ds.keys().collect::<BTreeSet<_>>(),
                ps.keys().collect::<BTreeSet<_>>(),
                "{target} {family}: the same series"
            );
            for (labels, s) in ds {
                let q = &ps[labels];
                assert_eq!(s["type"], q["type"], "{family}");
                match s["type"].as_str().unwrap() {
                    "counter" | "histogram" => {
                        let (a, b) = (
                            delta(s).unwrap(),
                            delta(q).unwrap_or_else(|| {
                                panic!("{family} {labels}: no increase from Prometheus: {q}")
                            }),
                        );
                        assert!(
                            agree(a, b),
                            "{family} {labels}: direct {a} vs Prometheus {b} over the window"
                        );
                    }
                    // Gauges are read at slightly different instants; only the constant ones are
                    // compared below.
                    _ => {}
                }
            }
        }
    }

    // The driven series agree tightly, not only within the sparse allowance.
    let driven: [(&str, &[&str]); 3] = [
        (
            "apiserver_request_total",
            &[
                r#""code":"200""#,
                r#""resource":"namespaces""#,
                r#""verb":"GET""#,
            ],
        ),
        (
            "apiserver_flowcontrol_rejected_requests_total",
            &[r#""reason":"queue-full""#],
        ),
        (
            "etcd_request_duration_seconds",
            &[r#""operation":"get""#, r#""type":"*core.Namespace""#],
        ),
    ];
    let (d, p) = (
        series_of(&direct, "apiserver"),
        series_of(&from_prom, "apiserver"),
    );
    for (family, must_contain) in driven {
        let (labels, s) = d[family]
            .iter()
            .find(|(l, _)| must_contain.iter().all(|m| l.contains(m)))
            .unwrap_or_else(|| panic!("{family}: no series with {must_contain:?}"));
        let (a, b) = (delta(s).unwrap(), delta(&p[family][labels]).unwrap());
        assert!(a >= 30.0, "{family} {labels}: only {a} events drove it");
        let off = (a - b).abs() / a;
        assert!(
            off <= RELATIVE,
            "{family} {labels}: {a} vs {b} ({:.1} %)",
            off * 100.0
        );
        eprintln!(
            "{family} {labels}: direct {a}, Prometheus {b:.1} ({:.1} % apart)",
            off * 100.0
        );
    }
    // A selector that matches nothing is a gap that says which, not an empty source.
    let (r, _) = extpath_run(
        &f,
        "collect",
        common(&[
            "--prometheus",
            &prom.url,
            "--since",
            "1m",
            "--prometheus-apiserver-selector",
            r#"job="kube-apiserver-elsewhere""#,
        ]),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert_eq!(
        crate::util::gaps_beyond_etcd(&b),
        [("metrics/apiserver".to_string(), "not_served".to_string())]
    );
    assert!(
        b["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["source"] == "metrics/apiserver")
            .and_then(|g| g["detail"].as_str())
            .unwrap()
            .contains(r#"{job="kube-apiserver-elsewhere"}"#)
    );
    assert_eq!(b["metrics"][0]["target"], "etcd");

    // Constant gauges are equal whichever way they were read.
    let (d, p) = (series_of(&direct, "etcd"), series_of(&from_prom, "etcd"));
    for g in ["etcd_server_has_leader", "etcd_server_quota_backend_bytes"] {
        let one = |s: &Series| s[g].values().next().unwrap()["value"].clone();
        assert_eq!(one(&d), one(&p), "{g}");
    }
    server.shutdown().await;
}

/// `docs/prometheus.md` shows the queries and the per-family table the code builds.
#[test]
fn the_promql_reference_in_the_docs_is_current() {
    const BEGIN: &str =
        "<!-- BEGIN GENERATED: UPDATE_DOCS=1 cargo test --test main prometheus -->\n";
    const END: &str = "<!-- END GENERATED -->";
    let path = repo().join("docs/prometheus.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = text.split_once(BEGIN).expect("the BEGIN marker");
    let (_, tail) = rest.split_once(END).expect("the END marker");
    let generated = extpath::collect::metrics::prometheus::families::reference();
    let expected = format!("{head}{BEGIN}\n{generated}\n{END}{tail}");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    } else {
        assert!(
            text == expected,
            "docs/prometheus.md is out of date; regenerate with: UPDATE_DOCS=1 cargo test --test main prometheus"
        );
    }
}

/// A Prometheus that cannot be reached costs its gaps, not the collection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_prometheus_is_a_gap_per_target() {
    let server = start_text(&scenario()).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let [closed] = free_ports();
    let (r, _) = extpath_run(
        &f,
        "collect",
        vec![
            "--kubeconfig".into(),
            kc.display().to_string(),
            "-o".into(),
            "json".into(),
            "--prometheus".into(),
            format!("http://127.0.0.1:{closed}"),
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert_eq!(
        crate::util::gaps_beyond_etcd(&b),
        [
            ("metrics/apiserver".to_string(), "unreachable".to_string()),
            ("metrics/etcd".into(), "unreachable".into()),
        ]
    );
    assert!(b.get("metrics").is_none(), "{}", b["metrics"]);
    // Everything else still came from the API server.
    assert!(b["flow_schemas"].as_array().is_some_and(|f| !f.is_empty()));
    server.shutdown().await;
}
