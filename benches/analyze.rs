//! Benchmark of `analyze` at scale (not a timed test): a generated bundle with 500 APIServices,
//! 300 webhooks, 2,000 CRDs, and the families the rules read out of a ~30 MB kube-apiserver
//! `/metrics` dump scraped twice a minute apart (`Shape::metrics_heavy` of
//! `support/scale_bundle.rs`). Prints the sizes, the wall time of loading the bundled rules, of
//! building the metrics, and of `analyze` (best and median of several runs, in the same process,
//! so ratios are meaningful), and the process's peak RSS.
//!
//! Run: `cargo bench --bench analyze` (release). `EXTPATH_BENCH_RUNS=N` changes the run count.

#[path = "support/peak.rs"]
mod peak;

#[path = "support/scale_bundle.rs"]
mod scale_bundle;

use std::time::Instant;

use extpath::engine::{Filter, RuleSet, Settings, analyze};
use scale_bundle::{Generated, Shape, generate};

fn main() {
    let runs: usize = std::env::var("EXTPATH_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let t = Instant::now();
    let shape = Shape::metrics_heavy();
    let Generated {
        bundle,
        dump_bytes,
        parse,
    } = generate(&shape);
    let build = t.elapsed();
    let series: usize = bundle
        .metrics
        .iter()
        .flat_map(|m| &m.families)
        .map(|f| f.series.len())
        .sum();
    let t = Instant::now();
    let rules = RuleSet::bundled();
    let load = t.elapsed();
    let mut times = Vec::new();
    let mut verdicts = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let d = analyze(&bundle, &rules, &Settings::default(), &Filter::default());
        times.push(t.elapsed());
        verdicts = d.verdicts.len();
    }
    times.sort();
    println!(
        "bundle: {} APIServices, {} webhooks, {} CRDs; metrics dump {:.1} MB -> {series} selected series (windowed)",
        shape.apiservices,
        shape.webhooks,
        shape.crds,
        dump_bytes as f64 / 1e6
    );
    println!("generate two scrapes and build the bundle: {build:.2?}");
    println!("baseline — parse and window the two scrapes: {parse:.2?}");
    println!("load {} bundled rules: {load:.2?}", rules.len());
    println!(
        "analyze ({verdicts} verdicts): best {:.2?}, median {:.2?} over {runs} runs",
        times[0],
        times[times.len() / 2]
    );
    println!(
        "ratios to the baseline: analyze {:.2}x, rule loading {:.2}x",
        times[times.len() / 2].as_secs_f64() / parse.as_secs_f64(),
        load.as_secs_f64() / parse.as_secs_f64()
    );
    println!("peak RSS (whole process): {:.0} MB", peak::own_mb());
}
