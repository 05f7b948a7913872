//! Throughput of the Prometheus text parser on a generated 30 MB kube-apiserver-style dump, with
//! prometheus-parse as the baseline measured in the same run:
//!
//! * `rules-selection`: this parser keeping the 40 families the rules read (one big histogram
//!   among them) — the live-collection case;
//! * `select-all`: this parser keeping every family;
//! * `prometheus-parse`: `Scrape::parse` over the lines, as its README shows.
//!
//! Run: `cargo bench --bench promtext`. After criterion's report, a summary prints MB/s (10^6
//! bytes per second, median and best sample) per variant and the ratio of medians to the
//! baseline, from the same samples.

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

    // The summary, from the measured samples — the last SAMPLE_SIZE calls (criterion's warm-up
    // calls come first and are left out): the median time per iteration, robust to a load spike
    // on a shared machine, and the best, closest to an idle machine. Ratios use the medians.
    let times = |s: &Samples| {
        let s = s.borrow();
        let mut t: Vec<f64> = s[s.len().saturating_sub(SAMPLE_SIZE)..]
            .iter()
            .map(|(n, d)| d.as_secs_f64() / (*n).max(1) as f64)
            .collect();
        t.sort_by(f64::total_cmp);
        (!t.is_empty()).then(|| (t[t.len() / 2], t[0]))
    };
    let baseline = times(&variants[2].1).map(|(median, _)| median);
    let mbs = |t: f64| bytes as f64 / t / 1e6;
    println!("\nsummary ({:.1} MB dump, same run):", bytes as f64 / 1e6);
    println!(
        "{:<18} {:>12} {:>14} {:>12} {:>20}",
        "variant", "median/iter", "MB/s (median)", "MB/s (best)", "× prometheus-parse"
    );
    for (name, samples) in &variants {
        let Some((median, best)) = times(samples) else {
            continue;
        };
        let ratio = baseline.map_or("-".to_string(), |b| format!("{:.1}", b / median));
        println!(
            "{:<18} {:>10.1}ms {:>14.0} {:>12.0} {:>20}",
            name,
            median * 1e3,
            mbs(median),
            mbs(best),
            ratio
        );
    }
}
