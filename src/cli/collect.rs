//! `collect`: gather an evidence bundle from the live cluster and print it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::kube_flags::{KubeFlags, parse_duration};
use super::{DocFormat, EXIT_OK};
use crate::collect::metrics::prometheus::{
    DEFAULT_APISERVER_SELECTOR, DEFAULT_ETCD_SELECTOR, DEFAULT_SINCE,
};
use crate::collect::{CollectOptions, EtcdOptions, Progress, PrometheusOptions};

/// Options shared by `collect` and `scan`.
#[derive(Debug, Clone, Args)]
pub struct CollectFlags {
    /// Log level on stderr, like kubectl's `-v`: 0 shows a progress bar when stderr is a terminal;
    /// 1 prints when each collection step finished (where a slow collection spends its time); 2
    /// adds one line per request to the API server (method, path, status, time, like kubectl
    /// -v=6); 3 adds the response headers a diagnosis reads (APF flow schema and priority level,
    /// audit id, Retry-After). Higher levels are 3.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 0)]
    pub verbosity: u8,
    /// Time between the two `/metrics` scrapes; `0` = one scrape (counters are then history only).
    /// With --prometheus it applies only to etcd's /metrics (--etcd-metrics-url).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub window: Duration,
    /// Bound on the whole run. `collect` stops collecting then (what has not answered is a gap);
    /// `scan` stops collecting at 90% of it (at most 5s before it) and leaves the rest to the
    /// analysis, which stops at the bound too: the subjects not judged by then are one
    /// Inconclusive verdict on Source/analysis (critical: the gate fails, exit 1).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The most bytes read of one /metrics body (kube-apiserver's or etcd's); a body past it is
    /// cut there, the series before the cut kept and the cut recorded as a gap. Units: k, M, G
    /// (1000s) or Ki, Mi, Gi (1024s).
    // Far above real bodies (the 1.24 kube-apiserver capture is 1.2 MB; clusters with many CRDs
    // and APIServices reach tens of MB), so only a broken or hostile server is cut.
    #[arg(long, value_name = "SIZE", default_value = "256Mi", value_parser = parse_size)]
    pub max_scrape_bytes: u64,
    /// The most series of the families extpath reads kept from one /metrics scrape; a scrape
    /// past it is cut there, like --max-scrape-bytes.
    #[arg(long, value_name = "N", default_value_t = crate::collect::metrics::DEFAULT_MAX_SERIES)]
    pub max_series: usize,
    /// How many objects one list may bring (APIServices, webhook configurations, CRDs, Services,
    /// Endpoints, Pods, Events…): a list with more stops there, and a gap says what was cut (for
    /// a core source, an Inconclusive verdict: exit 1).
    #[arg(long, value_name = "N", default_value_t = crate::collect::fetch::DEFAULT_MAX_OBJECTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_objects: usize,
    /// The part of `--timeout` kept for the analysis (`scan` sets it; `collect` keeps none).
    #[arg(skip)]
    pub analysis_reserve: Duration,
    /// Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT`, or
    /// `URLHOST:PORT=HOST:PORT` for a webhook called by URL (repeatable).
    #[arg(long = "backend-address", value_name = "SVC.NS=HOST:PORT", value_parser = parse_backend_address)]
    pub backend_address: Vec<(String, String)>,
    /// Send a server-side dry-run create (never stored) through each webhook that intercepts
    /// ConfigMap creation.
    #[arg(long)]
    pub probe_admission: bool,
    /// Read the last lines of the logs of the Pods behind APIServices and webhooks and keep the
    /// known error lines (needs `get` on pods/log, which deploy/rbac.yaml does not grant).
    #[arg(long)]
    pub pod_logs: bool,
    /// Do not list the resources of each aggregated group/version after its discovery answers,
    /// nor read one object of each CRD through its conversion webhook (the least-privilege
    /// ClusterRole in deploy/rbac.yaml does not allow those reads).
    #[arg(long)]
    pub skip_list_probe: bool,
    /// Do not send the two probes that impersonate an ordinary user: each aggregated
    /// group/version's discovery request again as `extpath:delegation-probe` (group
    /// `system:authenticated`), which finds an extension server whose delegated authorization fails
    /// for everyone outside system:masters before a user does, and one read RBAC does not allow as
    /// `extpath:authorizer-probe`, which finds an authorization webhook after RBAC that fails. They
    /// need `impersonate` on those two users and that group (deploy/rbac.yaml grants exactly that;
    /// without it each probe is a gap); they are not sent when --as is given.
    #[arg(long)]
    pub skip_delegation_probe: bool,
    /// etcd's /metrics URL (the client URL `https://HOST:2379`, or a `--listen-metrics-urls`
    /// address): adds etcd's own metrics, scraped in the same window, its /health and its alarms.
    #[arg(long, value_name = "URL", help_heading = "etcd")]
    pub etcd_metrics_url: Option<String>,
    /// Client certificate for etcd (mutual TLS).
    #[arg(
        long,
        value_name = "FILE",
        requires = "etcd_metrics_url",
        help_heading = "etcd"
    )]
    pub etcd_cert: Option<PathBuf>,
    /// Key of the etcd client certificate.
    #[arg(
        long,
        value_name = "FILE",
        requires = "etcd_metrics_url",
        help_heading = "etcd"
    )]
    pub etcd_key: Option<PathBuf>,
    /// CA that signed etcd's serving certificate.
    #[arg(
        long,
        value_name = "FILE",
        requires = "etcd_metrics_url",
        help_heading = "etcd"
    )]
    pub etcd_ca: Option<PathBuf>,
    /// Read the metrics from this Prometheus (base URL) instead of scraping /metrics: rates over
    /// --since, no window to wait for.
    #[arg(long, value_name = "URL", help_heading = "Prometheus")]
    pub prometheus: Option<String>,
    /// With --prometheus: how far back the rates reach [default: 10m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "prometheus", help_heading = "Prometheus")]
    pub since: Option<Duration>,
    /// With --prometheus: the end of that window, as an RFC 3339 time [default: now].
    #[arg(long, value_name = "TIME", value_parser = parse_time, requires = "prometheus", help_heading = "Prometheus")]
    pub until: Option<jiff::Timestamp>,
    /// File holding a bearer token for Prometheus.
    #[arg(
        long,
        value_name = "FILE",
        requires = "prometheus",
        help_heading = "Prometheus"
    )]
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// CA that signed Prometheus' serving certificate (default: the system's roots).
    #[arg(
        long,
        value_name = "FILE",
        requires = "prometheus",
        help_heading = "Prometheus"
    )]
    pub prometheus_ca: Option<PathBuf>,
    /// Label matchers of kube-apiserver's series in Prometheus.
    #[arg(long, value_name = "MATCHERS", default_value = DEFAULT_APISERVER_SELECTOR, help_heading = "Prometheus")]
    pub prometheus_apiserver_selector: String,
    /// Label matchers of etcd's series in Prometheus (read unless --etcd-metrics-url is given).
    #[arg(long, value_name = "MATCHERS", default_value = DEFAULT_ETCD_SELECTOR, help_heading = "Prometheus")]
    pub prometheus_etcd_selector: String,
    /// Merge the evidence a collection cannot gather from this bundle (repeatable): client output
    /// (kubectl, curl), log findings, Events, certificates and APF state not already collected, and
    /// metrics and health checks of targets the collection has none of. `replay serve --bundle`
    /// writes such a file; its recording time then becomes the collection time.
    #[arg(long, value_name = "FILE")]
    pub merge: Vec<PathBuf>,
}

/// `256Mi`, `64M`, `1G`, `1000`: a byte count with an optional decimal (k, M, G) or binary
/// (Ki, Mi, Gi) unit, and an optional trailing `B`.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches('B');
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: expected a byte count such as 256Mi, 64M or 1000000"))?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use k, M, G, Ki, Mi or Gi)"
            ));
        }
    };
    n.checked_mul(mult)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?}: expected a byte count above zero"))
}

fn parse_time(s: &str) -> Result<jiff::Timestamp, String> {
    s.parse::<jiff::Timestamp>()
        .map_err(|e| format!("{s:?}: expected an RFC 3339 time such as 2026-01-02T03:04:05Z ({e})"))
}

pub(crate) fn parse_backend_address(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected SERVICE.NAMESPACE=HOST:PORT"))?;
    if !k.contains('.') || !v.contains(':') {
        return Err(format!("{s:?}: expected SERVICE.NAMESPACE=HOST:PORT"));
    }
    Ok((k.to_string(), v.to_string()))
}

impl CollectFlags {
    /// The bundles of `--merge`, read before anything is collected.
    ///
    /// # Errors
    /// A file that is not a valid bundle: one line naming it, exit code 2.
    pub fn merges(&self) -> anyhow::Result<Vec<crate::bundle::EvidenceBundle>> {
        self.merge
            .iter()
            .map(|p| super::import::load_bundle_arg(p))
            .collect()
    }

    /// Merge the `--merge` bundles into a collected one.
    pub fn apply_merges(
        bundle: &mut crate::bundle::EvidenceBundle,
        merges: &[crate::bundle::EvidenceBundle],
    ) {
        for m in merges {
            crate::bundle::carried::merge(bundle, m);
        }
    }

    /// Flags that cannot work together, refused before anything is sent.
    ///
    /// # Errors
    /// `--timeout` shorter than `--window`: the second scrape could never happen (exit 2).
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.window.is_zero() && self.timeout <= self.window {
            return Err(super::input_error(format!(
                "--timeout {} is not longer than --window {}: the second /metrics scrape would be cut off (raise --timeout, or lower --window; --window 0 scrapes once)",
                humantime_short(self.timeout),
                humantime_short(self.window)
            )));
        }
        if !self.window.is_zero() && self.collection_timeout() <= self.window {
            return Err(super::input_error(format!(
                "--timeout {} leaves the collection {} (scan keeps {} for the analysis), not longer than --window {}: the second /metrics scrape would be cut off (raise --timeout, or lower --window; --window 0 scrapes once)",
                humantime_short(self.timeout),
                humantime_short(self.collection_timeout()),
                humantime_short(self.analysis_reserve),
                humantime_short(self.window)
            )));
        }
        Ok(())
    }

    /// How long the collection may take: `--timeout`, less what `scan` keeps for the analysis.
    pub fn collection_timeout(&self) -> Duration {
        self.timeout.saturating_sub(self.analysis_reserve)
    }

    /// The collection options.
    pub fn options(&self, kube: &KubeFlags, namespace: &str) -> CollectOptions {
        CollectOptions {
            // kubectl reads `--request-timeout=0` as "no timeout"; a collection never waits
            // unbounded on one request (DESIGN §5), so 0 falls back to the default instead.
            request_timeout: if kube.request_timeout.is_zero() {
                Duration::from_secs(10)
            } else {
                kube.request_timeout
            },
            timeout: self.collection_timeout(),
            window: self.window,
            max_objects: self.max_objects,
            backend_addresses: self
                .backend_address
                .iter()
                .cloned()
                .collect::<BTreeMap<_, _>>(),
            probe_admission: self.probe_admission,
            pod_logs: self.pod_logs,
            list_probe: !self.skip_list_probe,
            // Impersonation does not chain: a collection sent --as some user cannot be someone else.
            delegation_probe: !self.skip_delegation_probe && kube.as_user.is_none(),
            authorizer_probe: !self.skip_delegation_probe && kube.as_user.is_none(),
            namespace: namespace.to_string(),
            etcd: self.etcd_metrics_url.as_ref().map(|url| EtcdOptions {
                metrics_url: url.clone(),
                cert: self.etcd_cert.clone(),
                key: self.etcd_key.clone(),
                ca: self.etcd_ca.clone(),
            }),
            prometheus: self.prometheus.as_ref().map(|url| PrometheusOptions {
                url: url.clone(),
                since: self.since.unwrap_or(DEFAULT_SINCE),
                until: self.until,
                bearer_token_file: self.prometheus_bearer_token_file.clone(),
                ca: self.prometheus_ca.clone(),
                apiserver_selector: self.prometheus_apiserver_selector.clone(),
                etcd_selector: self.prometheus_etcd_selector.clone(),
            }),
            scrape_limits: crate::collect::metrics::ScrapeLimits {
                max_bytes: self.max_scrape_bytes,
                max_series: self.max_series,
            },
        }
    }
}

/// Arguments of `collect`.
#[derive(Debug, Args)]
pub struct CollectArgs {
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub collect: CollectFlags,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: DocFormat,
    #[command(flatten)]
    pub fleet: super::fleet::FleetFlags,
    /// Write a fleet bundle directory instead of printing: one bundle per context
    /// (`CONTEXT.yaml`, or `.json` with `-o json`) and an index, `fleet.yaml`, that names them
    /// (and says which contexts could not be collected, and why). `analyze DIR` reads it. Needs
    /// `--context` (one or several, comma-separated) or `--all-contexts`.
    #[arg(long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
}

/// A progress bar on stderr, only when stderr is a terminal; with `-v 1` or more, a timed line per
/// finished step instead (where a slow collection spends its time), numbered against the total.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    /// Timed lines (`-v 1` and up) instead of a bar.
    timed: bool,
    done: std::sync::atomic::AtomicU64,
    total: std::sync::atomic::AtomicU64,
    said: std::sync::Mutex<Vec<String>>,
}

impl Bar {
    fn with(bar: Option<indicatif::ProgressBar>, timed: bool) -> Self {
        Bar {
            bar,
            timed,
            done: Default::default(),
            total: Default::default(),
            said: Default::default(),
        }
    }

    /// A bar if stderr is a TTY, else nothing; timed lines when `verbosity` ≥ 1, and a line per
    /// request from 2 on (with the headers that matter from 3 on).
    pub fn with_verbosity(verbosity: u8) -> Self {
        if verbosity >= 2 {
            crate::collect::fetch::log_requests(log_line, verbosity >= 3);
        }
        if verbosity >= 1 {
            return Bar::with(None, true);
        }
        Bar::new()
    }

    /// A bar if stderr is a TTY, else nothing.
    pub fn new() -> Self {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Bar::with(None, false);
        }
        let bar = indicatif::ProgressBar::new(1);
        // 2 + 11 + 18 + 6 columns before the message, which takes what the terminal has left
        // (`wide_msg`): at 80 columns, 43 — `second /metrics scrape in 10 s (--window)` fits.
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} collecting [{bar:16}] {pos}/{len} {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Bar::with(Some(bar), false)
    }
    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One timed line on stderr, on the clock of the step lines.
fn log_line(line: &str) {
    eprintln!(
        "[{:>7.3}s] {line}",
        super::started().elapsed().as_secs_f64()
    );
}

impl Default for Bar {
    fn default() -> Self {
        Bar::new()
    }
}

impl Progress for Bar {
    fn set_total(&self, total: u64) {
        self.total
            .store(total, std::sync::atomic::Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_length(total);
        }
    }
    fn step(&self, what: &str) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(what.to_string());
        }
        if self.timed {
            log_line(&format!(
                "done {done}/{}: {what}",
                self.total.load(std::sync::atomic::Ordering::Relaxed)
            ));
        }
    }
    fn waiting(&self, what: &str, why: &str, remaining: Duration) {
        let secs = remaining.as_secs_f64().ceil();
        if let Some(b) = &self.bar {
            b.set_message(format!("{what} in {secs:.0} s ({why})"));
        }
        // Timed lines say it once, when the wait starts.
        if self.timed {
            let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
            if !said.iter().any(|s| s == what) {
                said.push(what.to_string());
                log_line(&format!("waiting {secs:.0} s: {what} ({why})"));
            }
        }
    }
}

/// Connect and collect; exit 3 when the API server cannot be reached at all.
pub async fn collect_bundle(
    kube: &KubeFlags,
    flags: &CollectFlags,
) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    flags.check()?;
    let merges = flags.merges()?;
    let bar = Bar::with_verbosity(flags.verbosity);
    let bundle = collect_bundle_with(kube, flags, &bar).await;
    bar.finish();
    let mut bundle = bundle?;
    CollectFlags::apply_merges(&mut bundle, &merges);
    Ok(bundle)
}

/// Connect and collect, reporting to `progress` (a fleet collects several clusters at once and
/// gives each none); exit 3 when the API server cannot be reached at all. `--merge` is not
/// applied here.
pub(crate) async fn collect_bundle_with(
    kube: &KubeFlags,
    flags: &CollectFlags,
    progress: &dyn Progress,
) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    let conn = crate::collect::connect(&kube.connect_options()).await?;
    let opts = flags.options(kube, &conn.namespace);
    let collected = crate::collect::collect(&conn, &opts, progress).await?;
    if let Some(why) = collected.unreachable.or(collected.refused) {
        return Err(super::unreachable_error(why));
    }
    Ok(collected.bundle)
}

pub fn run(args: CollectArgs) -> anyhow::Result<u8> {
    if let Some(targets) = super::fleet::targets(&args.kube, &args.fleet)? {
        let Some(dir) = &args.output_dir else {
            return Err(super::input_error(
                "several contexts need --output-dir DIR: one bundle per context and an index are written there",
            ));
        };
        return super::fleet::collect_to_dir(&args, targets, dir);
    }
    if let Some(dir) = &args.output_dir {
        let targets = super::fleet::single_target(&args.kube)?;
        return super::fleet::collect_to_dir(&args, targets, dir);
    }
    let rt = tokio::runtime::Runtime::new()?;
    let bundle = rt.block_on(collect_bundle(&args.kube, &args.collect))?;
    let text = match args.output {
        DocFormat::Yaml => bundle.to_yaml()?,
        DocFormat::Json => bundle.to_json()? + "\n",
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(EXIT_OK)
}

/// `90s` → `1m30s`, `10s` → `10s`: a duration as the flags take it.
fn humantime_short(d: Duration) -> String {
    let secs = d.as_secs();
    let ms = d.subsec_millis();
    match (secs / 60, secs % 60, ms) {
        (0, s, 0) => format!("{s}s"),
        (0, s, ms) => format!("{s}.{ms:03}s"),
        (m, 0, _) => format!("{m}m"),
        (m, s, _) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod size_tests {
    use super::parse_size;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("256Mi"), Ok(256 << 20));
        assert_eq!(parse_size("64M"), Ok(64_000_000));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(
            parse_size("12 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_size("Mi").is_err());
    }
}
