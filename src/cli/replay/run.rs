//! `replay [SCENARIO...|--all]`: run scenarios end to end and compare the verdicts with their
//! `expect:` blocks.
//!
//! For each scenario: start the reference server in this process (its backends, faults and
//! traffic), let it run for `--warmup` (the incident is under way when someone looks), collect
//! from it through its real TLS listener like `scan` does ([`collect_from_refserver`]),
//! classify with the bundled rules (plus `--rules DIR`, `--set`), and compare
//! ([`crate::engine::expect`]).
//! Scenarios run a few at a time (`--jobs`), each on its own server with its own ports, the ones
//! that need the longest warm-up (`expect.warmupMs`) first, so that they overlap the short ones
//! instead of ending the run alone. The result is a pass/fail table (or `-o json`, in file order)
//! and exit 1 on any mismatch (DESIGN §4).
//!
//! What this file does not do: judge anything (the engine does, and compares the verdicts with the
//! expectations), draw the result (`report::replay`), or know what a scenario's fault is (the
//! server makes it happen; the scenario file says what to expect).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use futures::StreamExt;

use crate::cli::analyze::RuleArgs;
use crate::cli::collect_refserver::collect_from_refserver;
use crate::cli::input_error;
use crate::cli::kube_flags::parse_duration;
use crate::cli::{EXIT_FINDINGS, EXIT_OK};
use crate::collect::{CollectOptions, EtcdOptions};
use crate::engine::expect::{Expected, compare};
use crate::engine::{Diagnosis, Filter, RuleSet, Settings};
use crate::refserver::{RefServer, Scenario, StartOptions, scenario};
use crate::report::ColorChoice;
use crate::report::replay::{
    Look, ReplayFormat, ReplayReport, ScenarioOutcome, verdict_lines, write,
};

/// Arguments of `replay [SCENARIO...|--all]`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (fixtures/scenarios/*.yaml).
    #[arg(value_name = "SCENARIO", required_unless_present = "all")]
    scenarios: Vec<PathBuf>,
    /// Every `*.yaml` in --dir.
    #[arg(long, conflicts_with = "scenarios")]
    all: bool,
    /// The scenario directory of --all.
    #[arg(long, value_name = "DIR", default_value = "fixtures/scenarios")]
    dir: PathBuf,
    /// Metrics window of each scan: the time between its two /metrics scrapes.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    window: Duration,
    /// How long each server runs before the scan starts: its `traffic:` clients have been at work
    /// for that long, as on a cluster where the incident is under way when someone looks. A
    /// scenario's `expect.warmupMs` makes it longer for that scenario.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// Scenarios run at the same time.
    #[arg(short = 'j', long, value_name = "N", default_value_t = 4)]
    jobs: usize,
    /// Output format: table (default) or json.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: ReplayFormat,
    /// Colour in the table: auto, always or never.
    #[arg(long = "color", value_enum, default_value = "auto")]
    color: ColorChoice,
    /// List every verdict of every scenario, not only the mismatches.
    #[arg(long)]
    verbose: bool,
    /// Set a rule setting, e.g. `cert_warn_days=14` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    #[command(flatten)]
    rule_args: RuleArgs,
}

/// What every scenario run shares.
struct Runner {
    rules: RuleSet,
    settings: Settings,
    window: Duration,
    warmup: Duration,
}

/// The scenario files named on the command line, or every `*.yaml` of `dir`, sorted.
fn scenario_files(args: &RunArgs) -> anyhow::Result<Vec<PathBuf>> {
    if !args.all {
        return Ok(args.scenarios.clone());
    }
    let entries = std::fs::read_dir(&args.dir)
        .map_err(|e| input_error(format!("{}: cannot read: {e}", args.dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(input_error(format!(
            "{}: no scenario files (*.yaml)",
            args.dir.display()
        )));
    }
    Ok(files)
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    let settings = Settings::with_assignments(&args.set).map_err(|e| input_error(e.to_string()))?;
    let rules = args.rule_args.load()?;
    // Every file is checked before anything starts: a typo in the last one should not cost a run.
    let mut scenarios = Vec::new();
    for path in scenario_files(&args)? {
        let s = scenario::load(&path).map_err(|e| input_error(e.to_string()))?;
        scenarios.push((path, s));
    }
    let runner = Runner {
        rules,
        settings,
        window: args.window,
        warmup: args.warmup,
    };
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Longest warm-up first (a stable sort keeps file order otherwise); results go back in file
    // order.
    let mut order: Vec<(usize, (PathBuf, Scenario))> = scenarios.into_iter().enumerate().collect();
    order.sort_by_key(|(_, (_, s))| std::cmp::Reverse(runner.warmup_of(s)));
    let runner = &runner;
    let mut outcomes: Vec<(usize, ScenarioOutcome)> = runtime.block_on(async {
        futures::stream::iter(order)
            .map(|(i, (path, s))| async move { (i, runner.run_one(path, s).await) })
            .buffer_unordered(args.jobs.max(1))
            .collect()
            .await
    });
    outcomes.sort_by_key(|(i, _)| *i);
    let outcomes: Vec<ScenarioOutcome> = outcomes.into_iter().map(|(_, o)| o).collect();
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    let report = ReplayReport {
        api_version: crate::engine::DIAGNOSIS_API_VERSION,
        kind: "ReplayReport",
        passed: outcomes.len() - failed,
        failed,
        seconds: started.elapsed().as_secs_f64(),
        scenarios: outcomes,
    };
    let opts = crate::report::RenderOptions::for_stdout(args.color, false);
    let look = Look {
        color: opts.color,
        width: opts.width,
        verbose: args.verbose,
    };
    let mut out = crate::cli::report_out();
    write(&mut out, args.output, &report, look)?;
    std::io::Write::flush(&mut out)?;
    Ok(if failed == 0 { EXIT_OK } else { EXIT_FINDINGS })
}

impl Runner {
    /// How long a scenario runs before its scan: `--warmup`, or its `expect.warmupMs` if longer.
    fn warmup_of(&self, s: &Scenario) -> Duration {
        self.warmup.max(Duration::from_millis(
            s.expect.warmup_ms.unwrap_or_default(),
        ))
    }

    async fn run_one(&self, path: PathBuf, scenario: Scenario) -> ScenarioOutcome {
        let started = Instant::now();
        let name = scenario.name.clone();
        let expect = scenario.expect.clone();
        let warmup = self.warmup_of(&scenario);
        let (checks, error, verdicts) = match self.diagnose(scenario, warmup).await {
            Ok(d) => {
                let expected = Expected {
                    subjects: &expect.subjects,
                    forbid: &expect.forbid,
                };
                (compare(expected, &d), None, verdict_lines(&d))
            }
            Err(e) => (Vec::new(), Some(format!("{e:#}")), Vec::new()),
        };
        ScenarioOutcome {
            scenario: name,
            file: shown(&path),
            passed: checks.iter().all(|c| c.ok) && error.is_none(),
            seconds: started.elapsed().as_secs_f64(),
            checks,
            error,
            verdicts,
        }
    }

    /// Start the scenario's server, scan it as `scan` would, and classify what was collected.
    async fn diagnose(&self, scenario: Scenario, warmup: Duration) -> anyhow::Result<Diagnosis> {
        let server = RefServer::start(scenario, StartOptions::default()).await?;
        tokio::time::sleep(warmup).await;
        // Every source the reference server offers: an operator with full access would use them.
        let mut opts = CollectOptions {
            window: self.window,
            pod_logs: true,
            ..CollectOptions::default()
        };
        // An operator with access to etcd passes --etcd-metrics-url; a scenario with an etcd
        // endpoint is that cluster.
        opts.etcd = server.etcd_url().map(|url| EtcdOptions {
            metrics_url: url,
            cert: None,
            key: None,
            ca: None,
        });
        let bundle = collect_from_refserver(&server, opts).await;
        server.shutdown().await;
        Ok(crate::engine::analyze(
            &bundle?,
            &self.rules,
            &self.settings,
            &Filter::default(),
        ))
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}
