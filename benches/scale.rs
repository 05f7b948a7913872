//! Scale benchmark (issue 7): `scan --window 0` of a large cluster, against the real kubectl fetching
//! the same data and against the slowest single request the scan makes, in one run.
//!
//! The cluster is the bundled reference server running a generated scenario: 500 APIServices (50
//! broken in five ways), 300 validating webhooks in 30 configurations, 2,000 CRDs, and a `/metrics`
//! padded to ~30 MB. Everything listens on 127.0.0.1.
//!
//! Run: `cargo bench --bench scale` (release build). Prints wall times, ratios and the scan's peak
//! RSS. Not a test: nothing here fails on a slow machine; it reports. `EXTPATH_SCALE_OUT=DIR` also
//! writes the generated scenario (`scale.yaml`, for `replay serve` under a profiler) and the scan's
//! diagnosis there; `EXTPATH_SCALE_SKIP_KUBECTL=1` skips the kubectl side.

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use extpath::refserver::{ClientAuth, RefServer, StartOptions, scenario};

/// The cluster's size. `EXTPATH_SCALE_DIVISOR=10` runs a tenth of it (a quick look, e.g. in a debug
/// build with `cargo test --bench scale`); the figures of record use the full size.
#[derive(Clone, Copy)]
struct Sizes {
    apiservices: usize,
    broken_each: usize,
    webhook_configs: usize,
    crds: usize,
    metrics_bytes: usize,
}

const WEBHOOKS_PER_CONFIG: usize = 10;

fn sizes() -> Sizes {
    let d = std::env::var("EXTPATH_SCALE_DIVISOR")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|d| *d >= 1)
        .unwrap_or(1);
    Sizes {
        apiservices: 500 / d,
        broken_each: (10 / d).max(1),
        webhook_configs: (30 / d).max(1),
        crds: 2000 / d,
        metrics_bytes: 30 * 1024 * 1024 / d,
    }
}

/// How the i-th APIService is broken, if it is.
fn fault(z: Sizes, i: usize) -> &'static str {
    match i / z.broken_each {
        0 => "service-missing",
        1 => "no-endpoints",
        2 => "wrong-ca",
        3 => "backend-down",
        4 => "port-mismatch",
        _ => "healthy",
    }
}

fn scenario_yaml(z: Sizes) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: scale\nserver:\n  availabilityPeriodMs: 600000\n  syntheticMetricsBytes: {}\ncas: [ext-ca, other-ca, webhook-ca]\nbackends:",
        z.metrics_bytes
    );
    for i in 0..z.apiservices {
        let issuer = if fault(z, i) == "wrong-ca" {
            "other-ca"
        } else {
            "ext-ca"
        };
        let down = if fault(z, i) == "backend-down" {
            "\n    behaviour: {down: true}"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  - name: ext{i}\n    kind: extension\n    certificate: {{issuer: {issuer}, names: [api.ext{i}.svc]}}\n    extension:\n      groupVersion: group{i}.example.com/v1\n      resources: [{{name: things, kind: Thing}}]{down}"
        );
    }
    let _ = writeln!(
        s,
        "  - name: policy\n    kind: admissionWebhook\n    certificate: {{issuer: webhook-ca, names: [policy.webhooks.svc]}}"
    );
    s.push_str("network:\n");
    for i in 0..z.apiservices {
        let _ = writeln!(s, "  10.244.{}.{}: ext{i}", i / 250, i % 250 + 1);
    }
    s.push_str("  10.245.0.1: policy\nobjects:\n");
    s.push_str("  - {apiVersion: v1, kind: Namespace, metadata: {name: webhooks}}\n");
    for i in 0..z.apiservices {
        let _ = writeln!(
            s,
            "  - {{apiVersion: v1, kind: Namespace, metadata: {{name: ext{i}}}}}"
        );
        if fault(z, i) != "service-missing" {
            let _ = writeln!(
                s,
                "  - {{apiVersion: v1, kind: Service, metadata: {{name: api, namespace: ext{i}}}, spec: {{ports: [{{name: https, port: 443, targetPort: 8443}}]}}}}"
            );
        }
        if fault(z, i) != "service-missing" && fault(z, i) != "no-endpoints" {
            let _ = writeln!(
                s,
                "  - {{apiVersion: v1, kind: Endpoints, metadata: {{name: api, namespace: ext{i}}}, subsets: [{{addresses: [{{ip: 10.244.{}.{}}}], ports: [{{name: https, port: 8443}}]}}]}}",
                i / 250,
                i % 250 + 1
            );
        }
        let port = if fault(z, i) == "port-mismatch" {
            8443
        } else {
            443
        };
        let _ = writeln!(
            s,
            "  - {{apiVersion: apiregistration.k8s.io/v1, kind: APIService, metadata: {{name: v1.group{i}.example.com}}, spec: {{group: group{i}.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, service: {{namespace: ext{i}, name: api, port: {port}}}, caBundle: '${{ca:ext-ca}}'}}}}"
        );
    }
    s.push_str("  - {apiVersion: v1, kind: Service, metadata: {name: policy, namespace: webhooks}, spec: {ports: [{name: https, port: 443, targetPort: 9443}]}}\n");
    s.push_str("  - {apiVersion: v1, kind: Endpoints, metadata: {name: policy, namespace: webhooks}, subsets: [{addresses: [{ip: 10.245.0.1}], ports: [{name: https, port: 9443}]}]}\n");
    for c in 0..z.webhook_configs {
        let _ = writeln!(
            s,
            "  - apiVersion: admissionregistration.k8s.io/v1\n    kind: ValidatingWebhookConfiguration\n    metadata: {{name: policy-{c}}}\n    webhooks:"
        );
        for w in 0..WEBHOOKS_PER_CONFIG {
            let _ = writeln!(
                s,
                "      - {{name: w{w}.policy-{c}.example.com, admissionReviewVersions: [v1], sideEffects: None, failurePolicy: Fail, timeoutSeconds: 5, clientConfig: {{service: {{namespace: webhooks, name: policy, path: /validate, port: 443}}, caBundle: '${{ca:webhook-ca}}'}}, namespaceSelector: {{matchLabels: {{guarded: 'yes'}}}}, rules: [{{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}}]}}"
            );
        }
    }
    for c in 0..z.crds {
        let _ = writeln!(
            s,
            "  - {{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {{name: widgets{c}.crd{c}.example.com}}, spec: {{group: crd{c}.example.com, scope: Namespaced, names: {{plural: widgets{c}, singular: widget{c}, kind: Widget{c}, listKind: Widget{c}List}}, versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]}}}}"
        );
    }
    s
}

fn timed(mut cmd: Command) -> (Duration, bool) {
    let started = Instant::now();
    let out = cmd.output().expect("command runs");
    (started.elapsed(), out.status.code().is_some())
}

/// CPU seconds (user + system) used so far by this process — the reference server's runtime, as
/// the main thread only waits meanwhile — and by its finished children (the scan, when it is the
/// only child so far).
fn cpu_seconds() -> (f64, f64) {
    let of = |who| {
        // SAFETY: getrusage only writes into the struct we pass.
        let u = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut u);
            u
        };
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    (of(libc::RUSAGE_SELF), of(libc::RUSAGE_CHILDREN))
}

#[path = "support/peak.rs"]
mod peak;

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let generated = Instant::now();
    let z = sizes();
    let text = scenario_yaml(z);
    if let Some(dir) = std::env::var_os("EXTPATH_SCALE_OUT") {
        // The generated scenario, to serve it alone (`replay serve`) for profiling.
        std::fs::write(std::path::Path::new(&dir).join("scale.yaml"), &text)
            .expect("write the scenario");
    }
    let sc = scenario::load_str(&text, "scale.yaml").expect("generated scenario loads");
    let server = rt
        .block_on(RefServer::start(sc, StartOptions::default()))
        .expect("server starts");
    eprintln!(
        "reference server up in {:.1} s ({} KB of scenario)",
        generated.elapsed().as_secs_f64(),
        text.len() / 1024
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig(ClientAuth::Token)).unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-extpath");

    // The same flags for scan and collect: one scrape, generous deadlines, every backend reachable.
    let extpath = |subcommand: &[&str]| {
        let mut c = Command::new(bin);
        c.env("KUBECONFIG", &kubeconfig)
            .env("HOME", dir.path())
            .args(subcommand)
            .args([
                "--window",
                "0",
                "-o",
                "json",
                "--request-timeout",
                "30s",
                "--timeout",
                "120s",
            ]);
        for (svc, addr) in server.backend_addresses() {
            c.arg("--backend-address").arg(format!("{svc}={addr}"));
        }
        c
    };

    // (c) extpath scan, its peak memory its own (`support/peak.rs`).
    let mut scan = extpath(&["scan"]);
    let (server_cpu_before, _) = cpu_seconds();
    let requests_before = server.requests().len();
    let out = peak::run(&mut scan);
    assert!(
        out.code == 0 || out.code == 1,
        "scan exited {} (0 or 1 expected: it ran to a verdict)",
        out.code
    );
    let scan_time = out.wall;
    let (server_cpu_after, scan_cpu) = cpu_seconds();
    let server_cpu = server_cpu_after - server_cpu_before;
    let scan_requests = server.requests().len() - requests_before;
    let scan_rss_kb = out.peak_kb;
    if let Some(dir) = std::env::var_os("EXTPATH_SCALE_OUT") {
        std::fs::write(
            std::path::Path::new(&dir).join("scale-diagnosis.json"),
            &out.stdout,
        )
        .expect("write the diagnosis");
    }
    let diagnosis: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("scan printed a Diagnosis");
    let verdicts = diagnosis["verdicts"].as_array().map_or(0, Vec::len);
    let broken = diagnosis["verdicts"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["subject"]["kind"] == "APIService" && v["class"] == "Aggregation")
                .count()
        })
        .unwrap_or(0);

    // Where the scan's time goes: collection alone, then analysis of its bundle alone.
    let bundle_path = dir.path().join("bundle.json");
    let mut collect = extpath(&["collect", "-v", "1"]);
    let started = Instant::now();
    let collected = collect.output().expect("collect runs");
    let collect_time = started.elapsed();
    std::fs::write(&bundle_path, &collected.stdout).unwrap();
    eprintln!(
        "collect's steps:\n{}",
        String::from_utf8_lossy(&collected.stderr)
    );
    let mut analyze = Command::new(bin);
    analyze.args(["analyze", "-o", "json"]).arg(&bundle_path);
    let (analyze_time, _) = timed(analyze);

    // (a) the real kubectl fetching the same data, as an engineer would.
    let kubectl = |args: &[&str]| {
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", &kubeconfig)
            .env("HOME", dir.path())
            .args(args);
        c
    };
    let skip_kubectl = std::env::var_os("EXTPATH_SCALE_SKIP_KUBECTL").is_some();
    let started = Instant::now();
    let (lists, _) = if skip_kubectl {
        (Duration::ZERO, true)
    } else {
        timed(kubectl(&[
            "get",
            "apiservices,services,endpoints,endpointslices,validatingwebhookconfigurations,mutatingwebhookconfigurations,crds",
            "-A",
            "-o",
            "json",
        ]))
    };
    let (metrics, _) = if skip_kubectl {
        (Duration::ZERO, true)
    } else {
        timed(kubectl(&["get", "--raw", "/metrics"]))
    };
    for i in (0..z.apiservices).filter(|_| !skip_kubectl) {
        let path = format!("/apis/group{i}.example.com/v1");
        let _ = timed(kubectl(&["get", "--raw", &path]));
    }
    let kubectl_time = started.elapsed();

    // (b) the slowest single request the scan makes, on its own.
    let client = rt.block_on(async {
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, server.ca_pem()).unwrap();
        let conn = extpath::collect::connect(&extpath::collect::ConnectOptions {
            server: Some(server.url()),
            certificate_authority: Some(ca),
            token: Some(server.admin_token().to_string()),
            request_timeout: Duration::from_secs(60),
            isolated: true,
            ..Default::default()
        })
        .await
        .unwrap();
        extpath::collect::Fetcher::new(conn.client, Duration::from_secs(60))
    });
    let mut slowest = (Duration::ZERO, String::new());
    for path in [
        "/metrics",
        "/apis/apiregistration.k8s.io/v1/apiservices?limit=500",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=500",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?limit=500",
        "/apis/group100.example.com/v1",
    ] {
        let started = Instant::now();
        let _ = rt.block_on(fetcher_get(&client, path));
        let t = started.elapsed();
        if t > slowest.0 {
            slowest = (t, path.to_string());
        }
    }
    let body = server.metrics_text();
    let started = Instant::now();
    let families =
        extpath::promtext::parse_str(&body, &extpath::bundle::metrics::default_selection())
            .expect("metrics parse");
    let parse = started.elapsed();

    println!(
        "scale: {} APIServices ({} broken), {} webhooks, {} CRDs, /metrics {:.1} MB ({} families kept)",
        z.apiservices,
        z.broken_each * 5,
        z.webhook_configs * WEBHOOKS_PER_CONFIG,
        z.crds,
        body.len() as f64 / 1e6,
        families.len()
    );
    println!(
        "(c) extpath scan --window 0:        {:>8.2} s   peak RSS {:.0} MB   {verdicts} verdicts, {broken} broken APIServices found",
        scan_time.as_secs_f64(),
        scan_rss_kb as f64 / 1024.0
    );
    println!("    requests the server received:   {scan_requests:>8}");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!(
        "    CPU during the scan:            {:>8.2} s reference server + {:.2} s scan, of {:.2} s ({cores} cores x wall)",
        server_cpu,
        scan_cpu,
        cores as f64 * scan_time.as_secs_f64()
    );
    println!(
        "    of which collect / analyze:     {:>8.2} s / {:.2} s ({:.1} MB bundle)",
        collect_time.as_secs_f64(),
        analyze_time.as_secs_f64(),
        collected.stdout.len() as f64 / 1e6
    );
    println!(
        "(a) kubectl, same data:             {:>8.2} s   (lists {:.2} s, /metrics {:.2} s, {} discovery GETs)",
        kubectl_time.as_secs_f64(),
        lists.as_secs_f64(),
        metrics.as_secs_f64(),
        z.apiservices
    );
    println!(
        "(b) slowest single request:         {:>8.2} s   ({})",
        slowest.0.as_secs_f64(),
        slowest.1
    );
    println!(
        "    parse of the /metrics body:     {:>8.2} s",
        parse.as_secs_f64()
    );
    println!(
        "scan / kubectl                      {:>8.3}   (target <= 0.5)",
        scan_time.as_secs_f64() / kubectl_time.as_secs_f64()
    );
    println!(
        "scan / (2 x slowest + parse)        {:>8.3}   (target <= 1)",
        scan_time.as_secs_f64() / (2.0 * slowest.0.as_secs_f64() + parse.as_secs_f64())
    );
    rt.block_on(server.shutdown());
}

async fn fetcher_get(f: &extpath::collect::Fetcher, path: &str) -> usize {
    f.request(http::Method::GET, path, None)
        .await
        .map(|r| r.body.len())
        .unwrap_or(0)
}
