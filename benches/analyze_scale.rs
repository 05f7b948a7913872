//! Benchmark of `analyze` as the cluster grows (issue 13 §1; not a timed test): generated bundles
//! with 1k, 10k and 50k remote APIServices and proportional probes (two each), webhooks (n/10),
//! CRDs (n/5) and log findings (n/100) — see `support/scale_bundle.rs`.
//!
//! Each size runs in a child process of its own (this binary, re-executed with
//! `EXTPATH_BENCH_SIZE=N`), so that one size's peak memory (`VmHWM` of `/proc/self/status`) is
//! not another's. In the child: build the bundle, time a baseline in the same process (a
//! JSON serialise and parse of the bundle: linear work over the same data), then `analyze`
//! (best of several runs). The parent prints a table: wall time, per-APIService time against the
//! smallest size (1.0 = linear), `analyze` over the baseline, and peak RSS.
//!
//! Run: `cargo bench --bench analyze_scale` (release). `EXTPATH_BENCH_SIZES=1000,10000` picks the
//! sizes; `EXTPATH_BENCH_RUNS=N` the runs per size (default 3; 1 above 20k APIServices);
//! `EXTPATH_BENCH_WRITE=DIR` also writes each size's bundle to `DIR/bundle-N.json`, for timing the
//! command line on it.

#[path = "support/scale_bundle.rs"]
mod scale_bundle;

#[path = "support/peak.rs"]
mod peak;

use std::process::Command;

use std::time::{Duration, Instant};

use extpath::bundle::EvidenceBundle;
use extpath::engine::{Filter, RuleSet, Settings, analyze};

/// One size, in this process; prints one `result` line for the parent.
fn child(n: usize) {
    let runs: usize = std::env::var("EXTPATH_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if n > 20_000 { 1 } else { 3 });
    let t = Instant::now();
    let bundle = scale_bundle::bundle(n);
    let build = t.elapsed();
    let rss_bundle = peak::own_mb();
    let t = Instant::now();
    let json = serde_json::to_string(&bundle).expect("the bundle serialises");
    let back: EvidenceBundle = serde_json::from_str(&json).expect("and parses back");
    let baseline = t.elapsed();
    let json_mb = json.len() as f64 / 1e6;
    // To measure the command line on the same bundle: `kubectl-extpath analyze <dir>/bundle-N.json`.
    if let Ok(dir) = std::env::var("EXTPATH_BENCH_WRITE") {
        let path = std::path::Path::new(&dir).join(format!("bundle-{n}.json"));
        std::fs::write(&path, &json).expect("the bundle is written");
    }
    drop(back);
    drop(json);
    let rules = RuleSet::bundled();
    let mut times: Vec<Duration> = Vec::new();
    let mut cpu: Vec<Duration> = Vec::new();
    let mut verdicts = 0;
    let mut broken_found = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let c = peak::own_cpu();
        let d = analyze(&bundle, &rules, &Settings::default(), &Filter::default());
        times.push(t.elapsed());
        cpu.push(peak::own_cpu().saturating_sub(c));
        verdicts = d.verdicts.len();
        broken_found = d
            .verdicts
            .iter()
            .filter(|v| {
                v.subject.kind.as_str() == "APIService"
                    && v.class == extpath::engine::Class::Aggregation
            })
            .count();
    }
    times.sort();
    cpu.sort();
    println!(
        "result n={n} subjects_verdicts={verdicts} broken_found={broken_found} build_s={:.3} baseline_s={:.4} json_mb={json_mb:.1} analyze_best_s={:.4} analyze_median_s={:.4} analyze_cpu_s={:.2} rss_bundle_mb={rss_bundle:.0} rss_peak_mb={:.0}",
        build.as_secs_f64(),
        baseline.as_secs_f64(),
        times[0].as_secs_f64(),
        times[times.len() / 2].as_secs_f64(),
        cpu[0].as_secs_f64(),
        peak::own_mb()
    );
}

fn field(line: &str, name: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    if let Some(n) = std::env::var("EXTPATH_BENCH_SIZE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        child(n);
        return;
    }
    let sizes: Vec<usize> = std::env::var("EXTPATH_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000]);
    let exe = std::env::current_exe().expect("the bench binary's path");
    let mut rows: Vec<String> = Vec::new();
    for &n in &sizes {
        let out = Command::new(&exe)
            .env("EXTPATH_BENCH_SIZE", n.to_string())
            .output()
            .expect("the child runs");
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().find(|l| l.starts_with("result ")) {
            Some(line) => rows.push(line.to_string()),
            None => {
                eprintln!(
                    "size {n}: the child failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                return;
            }
        }
    }
    let first = &rows[0];
    let per = |line: &str| field(line, "analyze_best_s") / field(line, "n");
    println!(
        "analyze of generated bundles (n APIServices, 2n probes, n/10 webhooks, n/5 CRDs, n/100 log findings); each size in its own process"
    );
    println!(
        "{:>8} {:>9} {:>10} {:>9} {:>12} {:>14} {:>12} {:>14} {:>10}",
        "n",
        "verdicts",
        "analyze",
        "CPU",
        "per n vs 1st",
        "baseline",
        "analyze/base",
        "peak RSS",
        "bundle RSS"
    );
    for line in &rows {
        println!(
            "{:>8} {:>9} {:>9.3}s {:>8.2}s {:>12.2} {:>13.3}s {:>12.2} {:>11.0} MB {:>7.0} MB",
            field(line, "n"),
            field(line, "subjects_verdicts"),
            field(line, "analyze_best_s"),
            field(line, "analyze_cpu_s"),
            per(line) / per(first),
            field(line, "baseline_s"),
            field(line, "analyze_best_s") / field(line, "baseline_s"),
            field(line, "rss_peak_mb"),
            field(line, "rss_bundle_mb"),
        );
    }
    println!(
        "baseline: a JSON serialise and parse of the same bundle, in the same process; per n vs 1st: analyze time per APIService over the first size's (1.00 = linear); CPU: user + system seconds of the best analyze run, all threads"
    );
}
