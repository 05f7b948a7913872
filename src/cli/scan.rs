//! `scan`: collect from the live cluster and classify every extension path — what the on-call
//! engineer and the CI gate run. Every `collect` option and every `analyze` option applies.
//! With several contexts (`--context a,b,c`, `--all-contexts`) it scans them as a fleet
//! ([`super::fleet`]).

use std::path::PathBuf;

use clap::Args;

use super::analyze::{AnalyzeFlags, report};
use super::collect::{CollectFlags, collect_bundle};
use super::kube_flags::KubeFlags;

/// Arguments of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub collect: CollectFlags,
    #[command(flatten)]
    pub analyze: AnalyzeFlags,
    #[command(flatten)]
    pub fleet: super::fleet::FleetFlags,
    /// Also write the evidence bundle to this file (YAML, or JSON when it ends in .json), to attach
    /// to the incident and analyse again elsewhere.
    #[arg(long = "save-bundle", value_name = "FILE")]
    pub save_bundle: Option<PathBuf>,
    /// Scan the embedded demo instead of a cluster: the bundled reference server running
    /// fixtures/scenarios/demo.yaml (two broken aggregated APIs, a webhook timing out, a healthy
    /// webhook) with its clients. Needs no cluster and no kubeconfig.
    #[arg(long, conflicts_with = "all_contexts")]
    pub demo: bool,
}

/// How long the demo server runs before the scan starts.
///
/// Longer than the demo webhook's `timeoutSeconds: 1` (it answers after 3 s), so its first timed-out
/// call is in the admission metrics before the first scrape; shorter would scan a cluster whose
/// incident has not happened yet.
const DEMO_WARMUP: std::time::Duration = std::time::Duration::from_millis(1500);

/// The demo scenario, embedded so `scan --demo` works from any directory.
const DEMO_SCENARIO: &str = include_str!("../../fixtures/scenarios/demo.yaml");

async fn collect_demo(
    flags: &CollectFlags,
    kube: &KubeFlags,
) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    flags.check()?;
    let merges = flags.merges()?;
    let scenario = crate::refserver::scenario::load_str(DEMO_SCENARIO, "demo.yaml")?;
    let server = crate::refserver::RefServer::start(scenario, Default::default()).await?;
    // The demo's clients run for a moment before the scan looks, as on a cluster in the middle of
    // an incident (its slow webhook takes a second to time out for the first time).
    let bar = super::collect::Bar::with_verbosity(flags.verbosity);
    crate::collect::wait_until(
        &bar,
        "scan starts",
        "demo warm-up",
        tokio::time::Instant::now() + DEMO_WARMUP,
    )
    .await;
    let bundle = super::collect_refserver::collect_from_refserver_with(
        &server,
        flags.options(kube, "default"),
        &bar,
    )
    .await;
    bar.finish();
    server.shutdown().await;
    let mut bundle = bundle?;
    CollectFlags::apply_merges(&mut bundle, &merges);
    Ok(bundle)
}

/// One scan of the cluster: collect, then classify with `prepared` until `deadline` (the
/// analysis judges no subject after it) — what `scan` prints and what `serve` repeats.
/// Exit-code errors as [`collect_bundle`] gives them (3: unreachable).
pub(crate) async fn scan_cluster(
    kube: &KubeFlags,
    collect: &CollectFlags,
    prepared: &super::analyze::Prepared,
    deadline: Option<crate::engine::Deadline>,
) -> anyhow::Result<(crate::bundle::EvidenceBundle, crate::engine::Diagnosis)> {
    let bundle = collect_bundle(kube, collect).await?;
    let diagnosis = prepared.diagnose_until(&bundle, deadline);
    Ok((bundle, diagnosis))
}

/// The share of `--timeout` the analysis keeps for itself: a tenth, at most 5 s. The analysis of
/// a 10,000-APIService cluster takes well under a second; a collection that runs to its own
/// deadline still leaves the analysis time to judge what it gathered.
pub fn analysis_reserve(timeout: std::time::Duration) -> std::time::Duration {
    (timeout / 10).min(std::time::Duration::from_secs(5))
}

pub fn run(mut args: ScanArgs) -> anyhow::Result<u8> {
    // Rules, settings and waivers are checked before a collection that may take the whole window.
    let prepared = args.analyze.prepare()?;
    // `--timeout` bounds the whole run: the collection stops early enough to leave the analysis
    // its reserve, and the analysis stops at the run's deadline.
    let timeout = args.collect.timeout;
    let deadline = crate::engine::Deadline {
        at: super::started() + timeout,
        timeout,
    };
    args.collect.analysis_reserve = analysis_reserve(timeout);
    if !args.demo
        && let Some(targets) = super::fleet::targets(&args.kube, &args.fleet)?
    {
        if args.save_bundle.is_some() {
            return Err(super::input_error(
                "--save-bundle writes one cluster's bundle; for several contexts use `collect --output-dir DIR`, then `analyze DIR`",
            ));
        }
        return super::fleet::scan(
            &args.kube,
            &args.collect,
            &args.fleet,
            &args.analyze,
            &prepared,
            targets,
        );
    }
    let rt = tokio::runtime::Runtime::new()?;
    let (bundle, diagnosis) = if args.demo {
        let bundle = rt.block_on(collect_demo(&args.collect, &args.kube))?;
        let diagnosis = prepared.diagnose_until(&bundle, Some(deadline));
        (bundle, diagnosis)
    } else {
        rt.block_on(scan_cluster(
            &args.kube,
            &args.collect,
            &prepared,
            Some(deadline),
        ))?
    };
    if let Some(path) = &args.save_bundle {
        let text = if path.extension().is_some_and(|e| e == "json") {
            bundle.to_json()? + "\n"
        } else {
            bundle.to_yaml()?
        };
        std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the bundle: {e}", path.display()))?;
    }
    report(&diagnosis, &args.analyze)
}
