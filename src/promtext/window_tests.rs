//! Window arithmetic over two parsed scrapes: counters, resets, histograms, summaries, series that
//! come and go, and quantiles over the window's bucket deltas.

use super::*;

const INF: f64 = f64::INFINITY;

fn windowed(before: &str, after: &str, seconds: f64) -> Vec<MetricFamily> {
    let sel = Selection::all();
    let before = parse_str(before, &sel).unwrap();
    let mut after = parse_str(after, &sel).unwrap();
    apply_window(&before, &mut after, seconds);
    after
}

fn series<'a>(fams: &'a [MetricFamily], name: &str, label: (&str, &str)) -> &'a MetricSeries {
    fams.iter()
        .find(|f| f.name == name)
        .and_then(|f| {
            f.series
                .iter()
                .find(|s| s.labels.get(label.0).map(String::as_str) == Some(label.1))
        })
        .unwrap_or_else(|| panic!("no {name}{{{}={:?}}}", label.0, label.1))
}

fn window(s: &MetricSeries) -> &SeriesWindow {
    s.window.as_ref().expect("a window")
}

fn v(x: f64) -> Option<MetricValue> {
    Some(MetricValue(x))
}

const COUNTERS_BEFORE: &str =
    "# TYPE c counter\nc{k=\"steady\"} 10\nc{k=\"restarted\"} 100\nc{k=\"gone\"} 7\n";
const COUNTERS_AFTER: &str = "# TYPE c counter\nc{k=\"steady\"} 25\nc{k=\"restarted\"} 30\nc{k=\"new\"} 4\n# TYPE n counter\nn 6\n";

#[test]
fn counter_delta_and_rate() {
    let fams = windowed(COUNTERS_BEFORE, COUNTERS_AFTER, 15.0);
    let w = window(series(&fams, "c", ("k", "steady")));
    assert_eq!((w.delta, w.rate, w.reset), (v(15.0), v(1.0), false));
    assert!(w.buckets.is_empty() && w.sum_delta.is_none());
}

// An apiserver restarted inside the window (a rolling control-plane upgrade): a plain difference
// would be negative, and Prometheus' `rate()` counts from zero instead. The flag lets a rule say
// the window spans a restart rather than trust a rate across it.
#[test]
fn counter_reset_counts_from_zero_and_is_flagged() {
    let fams = windowed(COUNTERS_BEFORE, COUNTERS_AFTER, 15.0);
    let w = window(series(&fams, "c", ("k", "restarted")));
    assert_eq!((w.delta, w.rate, w.reset), (v(30.0), v(2.0), true));
}

#[test]
fn series_that_appear_count_from_zero_and_gone_ones_are_not_carried() {
    let fams = windowed(COUNTERS_BEFORE, COUNTERS_AFTER, 2.0);
    let w = window(series(&fams, "c", ("k", "new")));
    assert_eq!((w.delta, w.rate, w.reset), (v(4.0), v(2.0), false));
    // A family absent from the earlier scrape: every series appeared.
    let n = &fams.iter().find(|f| f.name == "n").unwrap().series[0];
    assert_eq!(window(n).delta, v(6.0));
    let c = fams.iter().find(|f| f.name == "c").unwrap();
    assert_eq!(c.series.len(), 3);
    assert!(c.series.iter().all(|s| s.labels["k"] != "gone"));
}

#[test]
fn gauges_untyped_and_summary_quantiles_get_no_window() {
    let before =
        "# TYPE g gauge\ng 5\nu 1\n# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 10\ns_count 4\n";
    let after =
        "# TYPE g gauge\ng 2\nu 9\n# TYPE s summary\ns{quantile=\"0.5\"} 3\ns_sum 16\ns_count 7\n";
    let fams = windowed(before, after, 3.0);
    let g = &fams[0].series[0];
    assert_eq!((g.value, g.window.as_ref()), (v(2.0), None));
    assert_eq!(fams[1].series[0].window, None);
    let s = &fams[2];
    assert_eq!(s.series[0].window, None, "a quantile is not an amount");
    let w = window(&s.series[1]);
    assert_eq!(
        (w.sum_delta, w.count_delta, w.delta),
        (v(6.0), v(3.0), v(3.0))
    );
    assert_eq!((w.rate, w.reset), (v(1.0), false));
}

const H_BEFORE: &str = "# TYPE h histogram
h_bucket{k=\"a\",le=\"0.1\"} 10
h_bucket{k=\"a\",le=\"1\"} 20
h_bucket{k=\"a\",le=\"+Inf\"} 20
h_sum{k=\"a\"} 4
h_count{k=\"a\"} 20
h_bucket{k=\"r\",le=\"1\"} 50
h_bucket{k=\"r\",le=\"+Inf\"} 50
h_sum{k=\"r\"} 9
h_count{k=\"r\"} 50
h_bucket{k=\"m\",le=\"1\"} 10
h_bucket{k=\"m\",le=\"+Inf\"} 10
h_sum{k=\"m\"} 2
h_count{k=\"m\"} 10
";
const H_AFTER: &str = "# TYPE h histogram
h_bucket{k=\"a\",le=\"0.1\"} 10
h_bucket{k=\"a\",le=\"1\"} 28
h_bucket{k=\"a\",le=\"+Inf\"} 30
h_sum{k=\"a\"} 10
h_count{k=\"a\"} 30
h_bucket{k=\"r\",le=\"1\"} 3
h_bucket{k=\"r\",le=\"+Inf\"} 4
h_sum{k=\"r\"} 1
h_count{k=\"r\"} 4
h_bucket{k=\"m\",le=\"1\"} 2
h_bucket{k=\"m\",le=\"+Inf\"} 12
h_sum{k=\"m\"} 30
h_count{k=\"m\"} 12
";

fn deltas(w: &SeriesWindow) -> Vec<(f64, f64)> {
    w.buckets.iter().map(|b| (b.le.0, b.count.0)).collect()
}

#[test]
fn histogram_bucket_sum_and_count_deltas() {
    let fams = windowed(H_BEFORE, H_AFTER, 5.0);
    let w = window(series(&fams, "h", ("k", "a")));
    assert_eq!(deltas(w), [(0.1, 0.0), (1.0, 8.0), (INF, 10.0)]);
    assert_eq!((w.sum_delta, w.count_delta), (v(6.0), v(10.0)));
    assert_eq!((w.delta, w.rate, w.reset), (v(10.0), v(2.0), false));
}

#[test]
fn histogram_reset_when_count_falls() {
    let fams = windowed(H_BEFORE, H_AFTER, 5.0);
    let w = window(series(&fams, "h", ("k", "r")));
    assert!(w.reset);
    assert_eq!(deltas(w), [(1.0, 3.0), (INF, 4.0)]);
    assert_eq!((w.sum_delta, w.count_delta), (v(1.0), v(4.0)));
}

// The restart a `_count` check alone misses: the new process saw more observations than the old
// one had, all slower. Taking the deltas against the old process would give negative low buckets
// and a quantile from nonsense.
#[test]
fn histogram_reset_when_a_bucket_falls_though_count_rose() {
    let fams = windowed(H_BEFORE, H_AFTER, 5.0);
    let w = window(series(&fams, "h", ("k", "m")));
    assert!(w.reset, "bucket le=1 went 10 → 2: another process");
    assert_eq!(deltas(w), [(1.0, 2.0), (INF, 12.0)]);
    assert_eq!((w.sum_delta, w.count_delta), (v(30.0), v(12.0)));
}

// The reason metrics are scraped twice (DESIGN §2): a p50 over the server's whole life hides a
// latency that started ten minutes ago. The window's quantile must come from the bucket deltas.
#[test]
fn quantiles_over_the_window_differ_from_the_cumulative_ones() {
    let fams = windowed(H_BEFORE, H_AFTER, 5.0);
    let s = series(&fams, "h", ("k", "a"));
    // Since start: 10 of 30 observations ≤ 0.1, so the median interpolates in (0.1, 1].
    let cumulative = histogram_quantile(0.5, &s.buckets).unwrap();
    assert!((cumulative - (0.1 + 0.9 * (5.0 / 18.0))).abs() < 1e-12);
    // In the window: none ≤ 0.1, 8 in (0.1, 1], 2 above.
    let w = window(s);
    let median = w.quantile(0.5).unwrap();
    assert!(
        (median - (0.1 + 0.9 * (5.0 / 8.0))).abs() < 1e-12,
        "{median}"
    );
    assert_eq!(w.quantile(0.95), Some(1.0), "rank in the +Inf bucket");
    // A window without observations has no quantile.
    let idle = windowed(H_BEFORE, H_BEFORE, 5.0);
    assert_eq!(window(series(&idle, "h", ("k", "a"))).quantile(0.5), None);
}

// Two scrapes with the same timestamp (a replayed recording read twice at once) must not divide
// by zero, and a NaN sample compares false both ways, so it must not read as a fall.
#[test]
fn no_rate_over_an_empty_window_and_nan_is_not_a_reset() {
    let fams = windowed(
        "# TYPE c counter\nc 1\nd 1\n",
        "# TYPE c counter\nc 3\n",
        0.0,
    );
    let w = window(&fams[0].series[0]);
    assert_eq!((w.delta, w.rate), (v(2.0), None));
    let fams = windowed("# TYPE c counter\nc 1\n", "# TYPE c counter\nc NaN\n", 1.0);
    let w = window(&fams[0].series[0]);
    assert!(w.delta.unwrap().0.is_nan());
    assert!(!w.reset);
}

#[test]
fn series_match_on_the_whole_label_set() {
    let fams = windowed(
        "# TYPE c counter\nc{a=\"1\",b=\"2\"} 5\n",
        "# TYPE c counter\nc{b=\"2\",a=\"1\"} 8\nc{a=\"1\"} 8\n",
        1.0,
    );
    assert_eq!(window(&fams[0].series[0]).delta, v(3.0));
    assert_eq!(window(&fams[0].series[1]).delta, v(8.0));
}
