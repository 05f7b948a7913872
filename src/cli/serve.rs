//! `serve`: the exporter — scan the cluster every `--interval` and serve the last diagnosis over
//! HTTP (`/metrics`, `/diagnosis`, `/healthz`, `/readyz`) for Prometheus. Made to run as the
//! Deployment in deploy/exporter.yaml (in-cluster configuration, the read-only ClusterRole); out of
//! the cluster it takes kubectl's connection flags like `scan`.
//!
//! The scan is `scan`'s ([`super::scan::scan_cluster`]) with the same collection and rule options;
//! the schedule and the HTTP surface are [`crate::exporter`]'s. SIGTERM, SIGINT (Ctrl-C) and
//! SIGHUP end it: a scan in flight is dropped, the listener closes, exit code 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::analyze::{AnalyzeFlags, FailOn, RuleArgs};
use super::collect::CollectFlags;
use super::kube_flags::{KubeFlags, parse_duration};
use super::{CliError, EXIT_INPUT, EXIT_OK, input_error};
use crate::exporter::{ScanOutcome, Shared};

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub collect: CollectFlags,
    /// Address to serve HTTP on: `HOST:PORT`, or `:PORT` for every interface. Port 0 picks a free
    /// one; the address bound is printed on stderr (`listening on http://…`).
    #[arg(long, value_name = "ADDR", default_value = ":9184")]
    pub listen: String,
    /// Time from the start of one scan to the start of the next, jittered by ±10 %. A scan that
    /// takes longer is never run twice at once: the next one starts when it ends.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Do not run this rule (repeatable).
    #[arg(long = "skip-rule", value_name = "ID")]
    pub skip_rules: Vec<String>,
    /// Set a rule setting, e.g. `cert_warn_days=14` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A waivers file (docs/waivers.md): waived verdicts get no `extpath_verdict` series.
    #[arg(long = "waivers", value_name = "FILE")]
    pub waivers: Option<PathBuf>,
    #[command(flatten)]
    pub rule_args: RuleArgs,
}

/// `:9184` → every interface; `HOST:PORT` as given.
fn listen_addrs(listen: &str) -> anyhow::Result<Vec<SocketAddr>> {
    let bad = || {
        input_error(format!(
            "--listen {listen:?}: expected HOST:PORT or :PORT (e.g. :9184, 127.0.0.1:0)"
        ))
    };
    if let Some(port) = listen.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| bad())?;
        // Dual-stack where the kernel allows it, else IPv4.
        return Ok(vec![
            SocketAddr::from(([0u16; 8], port)),
            SocketAddr::from(([0u8; 4], port)),
        ]);
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = listen.to_socket_addrs().map_err(|_| bad())?.collect();
    if addrs.is_empty() {
        return Err(bad());
    }
    Ok(addrs)
}

async fn bind(listen: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in listen_addrs(listen)? {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(input_error(format!(
        "--listen {listen}: cannot bind: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    )))
}

/// Resolves on SIGTERM, SIGINT or SIGHUP.
///
/// SIGTERM is how the kubelet stops a container (SIGKILL follows after the pod's grace period,
/// 30 s by default), so the exporter must end on it promptly rather than finish a scan.
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = hup.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

// Anything but a CLI error with another exit code counts: an unreachable API server (3) is a state
// the exporter reports in `extpath_scan_errors_total` while it waits for the cluster to come back,
// not a configuration to crash on.
fn is_input_error(e: &anyhow::Error) -> bool {
    e.downcast_ref::<CliError>()
        .is_none_or(|c| c.code == EXIT_INPUT)
}

pub fn run(mut args: ServeArgs) -> anyhow::Result<u8> {
    // Each scan keeps to `--timeout` as `scan` does: the analysis has its reserve of it.
    args.collect.analysis_reserve = super::scan::analysis_reserve(args.collect.timeout);
    if args.interval.is_zero() {
        return Err(input_error("--interval 0: scans need time between them"));
    }
    let analyze = AnalyzeFlags {
        output: crate::report::Format::Json,
        color: crate::report::ColorChoice::Never,
        wide: false,
        show_healthy: false,
        classes: Vec::new(),
        subjects: Vec::new(),
        rules: Vec::new(),
        skip_rules: args.skip_rules.clone(),
        set: args.set.clone(),
        waivers: args.waivers.clone(),
        // Unused by the exporter: `extpath_verdict` exports every verdict a warning gate fails,
        // and alerts choose their own threshold on the `severity` label.
        fail_on: FailOn::Critical,
        rule_args: args.rule_args.clone(),
    };
    let prepared = analyze.prepare()?;
    args.collect.check()?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(serve(&args, &prepared));
    // A scan dropped mid-flight may leave blocking work behind; it must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    result
}

async fn serve(args: &ServeArgs, prepared: &super::analyze::Prepared) -> anyhow::Result<u8> {
    let listener = bind(&args.listen).await?;
    let addr = listener.local_addr()?;
    let shared = Shared::new(args.interval);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = {
        let app = crate::exporter::router(shared.clone());
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
        })
    };
    eprintln!(
        "extpath serve: listening on http://{addr} (/metrics, /diagnosis, /healthz, /readyz); scanning every {:?}",
        args.interval
    );

    // The first scan's configuration errors (no kubeconfig, a bad flag file) end the exporter:
    // a Deployment should crash-loop with the message rather than serve nothing for ever.
    let mut first = true;
    let scan = || {
        let was_first = std::mem::replace(&mut first, false);
        async move {
            let deadline = crate::engine::Deadline {
                at: std::time::Instant::now() + args.collect.timeout,
                timeout: args.collect.timeout,
            };
            match super::scan::scan_cluster(&args.kube, &args.collect, prepared, Some(deadline))
                .await
            {
                Ok(done) => Ok(ScanOutcome::Complete(Box::new(done))),
                Err(e) if was_first && is_input_error(&e) => Err(e),
                Err(e) => Ok(ScanOutcome::Failed(format!("{e:#}"))),
            }
        }
    };
    let log = |outcome: &ScanOutcome, took: Duration| match outcome {
        ScanOutcome::Complete(done) => eprintln!(
            "extpath serve: scan complete in {:.1}s: {}",
            took.as_secs_f64(),
            done.1.summary.headline
        ),
        ScanOutcome::Failed(why) => {
            eprintln!(
                "extpath serve: scan failed after {:.1}s: {why}",
                took.as_secs_f64()
            )
        }
    };
    let looping = crate::exporter::scan_loop(shared.clone(), args.interval, scan, log);
    let result = tokio::select! {
        e = looping => Err(e),
        _ = terminated() => {
            eprintln!("extpath serve: stopping");
            Ok(EXIT_OK)
        }
    };
    let _ = stop_tx.send(true);
    // Scrapes in flight get a moment; keep-alive connections do not hold the exit.
    let _ = tokio::time::timeout(Duration::from_millis(500), server).await;
    result
}
