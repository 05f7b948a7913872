//! Throughput of the Prometheus text parser on a generated 30 MB kube-apiserver-style dump, with
//! prometheus-parse as the baseline measured in the same run:
//!
//! * `rules-selection`: this parser keeping the 40 families the rules read (one big histogram
//!   among them) — the live-collection case;
//! * `select-all`: this parser keeping every family;
//! * `prometheus-parse`: `Scrape::parse` over the lines, as its README shows.
//!
//! Run: `cargo bench --bench promtext`. After criterion's report, a summary prints MB/s (10^6
//! bytes per second) per variant and the ratio to the baseline, from the same samples.

#[path = "promtext_dump.rs"]
mod promtext_dump;

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use extpath::promtext::{Selection, parse_str};
use prometheus_parse::Scrape;

type Samples = Rc<RefCell<Vec<(u64, Duration)>>>;

const SAMPLE_SIZE: usize = 10;

fn main() {
    let text = promtext_dump::dump_string();
    let bytes = text.len() as u64;
    let rules = Selection::names(promtext_dump::RULES_SELECTION);
    let all = Selection::all();

    // Sanity before timing: the variants see the same dump and the selection finds its families.
    let picked = parse_str(&text, &rules).expect("the dump parses");
    let whole = parse_str(&text, &all).expect("the dump parses");
    let series =
        |f: &[extpath::promtext::MetricFamily]| f.iter().map(|f| f.series.len()).sum::<usize>();
    println!(
        "dump: {:.1} MB, {} lines; rules selection: {} families, {} series; all: {} families, {} series",
        bytes as f64 / 1e6,
        text.lines().count(),
        picked.len(),
        series(&picked),
        whole.len(),
        series(&whole)
    );
    drop((picked, whole));

    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(SAMPLE_SIZE)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10));
    let mut group = criterion.benchmark_group("promtext-30MB");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Bytes(bytes));

    let variants: Vec<(&str, Samples)> = ["rules-selection", "select-all", "prometheus-parse"]
        .into_iter()
        .map(|n| (n, Samples::default()))
        .collect();
    for (name, samples) in &variants {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    match *name {
                        "rules-selection" => drop(black_box(parse_str(black_box(&text), &rules))),
                        "select-all" => drop(black_box(parse_str(black_box(&text), &all))),
                        _ => drop(black_box(Scrape::parse(
                            black_box(&text).lines().map(|l| Ok(l.to_owned())),
                        ))),
                    }
                }
                let elapsed = start.elapsed();
                samples.borrow_mut().push((iters, elapsed));
                elapsed
            })
        });
    }
    group.finish();
    criterion.final_summary();

    // The summary: mean time per iteration over the measured samples, which are the last
    // SAMPLE_SIZE calls (criterion's warm-up calls come first and are left out).
    let per_iter = |s: &Samples| {
        let s = s.borrow();
        let measured = &s[s.len().saturating_sub(SAMPLE_SIZE)..];
        let (iters, time) = measured
            .iter()
            .fold((0u64, Duration::ZERO), |(i, t), (n, d)| (i + n, t + *d));
        (iters > 0).then(|| time.as_secs_f64() / iters as f64)
    };
    let baseline = per_iter(&variants[2].1);
    println!("\nsummary ({:.1} MB dump, same run):", bytes as f64 / 1e6);
    println!(
        "{:<18} {:>12} {:>10} {:>20}",
        "variant", "time/iter", "MB/s", "× prometheus-parse"
    );
    for (name, samples) in &variants {
        let Some(t) = per_iter(samples) else { continue };
        let ratio = baseline.map_or("-".to_string(), |b| format!("{:.1}", b / t));
        println!(
            "{:<18} {:>10.1}ms {:>10.0} {:>20}",
            name,
            t * 1e3,
            bytes as f64 / t / 1e6,
            ratio
        );
    }
}
