//! The parser and the window arithmetic on the real captures: every dump parses, selections agree
//! with the whole, histograms keep the format's invariants, and windows over real scrape pairs give
//! the increases the capture notes record (METRICS-NOTES.md), including across the real restart
//! of kube-apiserver between scenarios 13 and 20a.

use extpath::promtext::{
    MetricFamily, MetricKind, MetricSeries, Selection, apply_window, histogram_quantile, parse_str,
};

fn dump(rel: &str) -> Vec<MetricFamily> {
    let path = crate::util::repo().join("fixtures/raw").join(rel);
    super::parsed(&path).as_ref().clone()
}

fn find<'a>(fams: &'a [MetricFamily], name: &str, labels: &[(&str, &str)]) -> &'a MetricSeries {
    let fam = fams.iter().find(|f| f.name == name).expect(name);
    fam.series
        .iter()
        .find(|s| {
            s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("{name}{labels:?}"))
}

#[test]
fn every_dump_parses_keeps_histogram_invariants_and_selections_agree_with_the_whole() {
    let selection = Selection::names([
        "apiserver_request_total",
        "apiserver_request_duration_seconds",
        "aggregator_unavailable_apiservice",
        "etcd_request_duration_seconds",
        "go_gc_duration_seconds",
        "etcd_disk_wal_fsync_duration_seconds",
    ])
    .with_prefix("apiserver_flowcontrol_");
    let mut histograms = 0;
    for path in super::real_dumps() {
        let text = super::read(&path);
        let whole = super::parsed(&path);
        assert!(
            whole.len() > 50,
            "{}: {} families",
            path.display(),
            whole.len()
        );
        let picked = parse_str(&text, &selection).unwrap();
        let expected: Vec<&MetricFamily> =
            whole.iter().filter(|f| selection.wants(&f.name)).collect();
        assert!(!picked.is_empty(), "{}", path.display());
        assert_eq!(
            picked.iter().collect::<Vec<_>>(),
            expected,
            "{}",
            path.display()
        );

        for f in whole.iter().filter(|f| f.kind == MetricKind::Histogram) {
            for s in &f.series {
                let last = s.buckets.last().expect("buckets");
                assert_eq!(last.le.0, f64::INFINITY, "{} {:?}", f.name, s.labels);
                assert_eq!(
                    Some(last.count),
                    s.count,
                    "+Inf bucket is _count: {}",
                    f.name
                );
                assert!(s.sum.is_some() && s.value.is_none() && !s.labels.contains_key("le"));
                assert!(s.buckets.windows(2).all(|w| w[0].le.0 < w[1].le.0));
                assert!(s.buckets.windows(2).all(|w| w[0].count.0 <= w[1].count.0));
                histograms += 1;
            }
        }
    }
    assert!(histograms > 5_000, "{histograms}");
}

#[test]
fn known_values_of_the_captures() {
    let wardle = [("name", "v1alpha1.wardle.example.com")];
    let healthy = dump("00-healthy/kube-apiserver-metrics.txt");
    let down = dump("01-server-down-settled/kube-apiserver-metrics.txt");
    let gauge = |f: &[MetricFamily]| find(f, "aggregator_unavailable_apiservice", &wardle).value;
    assert_eq!(gauge(&healthy).unwrap().0, 0.0);
    assert_eq!(gauge(&down).unwrap().0, 1.0);
    let kind = |f: &[MetricFamily], n: &str| f.iter().find(|x| x.name == n).unwrap().kind;
    assert_eq!(
        kind(&down, "aggregator_unavailable_apiservice"),
        MetricKind::Gauge
    );
    assert_eq!(kind(&down, "apiserver_request_total"), MetricKind::Counter);
    assert_eq!(kind(&down, "go_gc_duration_seconds"), MetricKind::Summary);
}

const DISCOVERY_503: [(&str, &str); 8] = [
    ("code", "503"),
    ("component", "aggregator"),
    ("group", ""),
    ("resource", ""),
    ("scope", ""),
    ("subresource", "/apis/wardle.example.com/v1alpha1"),
    ("verb", "GET"),
    ("version", ""),
];

#[test]
fn windows_over_real_scrapes_give_the_recorded_increases() {
    // METRICS-NOTES.md: the discovery 503 counter read 14 then 23 in scenario 02.
    let before = dump("02-service-missing-immediate/kube-apiserver-metrics.txt");
    let mut after = dump("02-service-missing-settled/kube-apiserver-metrics.txt");
    apply_window(&before, &mut after, 30.0);
    let s = find(
        &after,
        "apiserver_request_terminations_total",
        &DISCOVERY_503,
    );
    let w = s.window.as_ref().unwrap();
    assert_eq!(
        (w.delta.unwrap().0, w.rate.unwrap().0, w.reset),
        (9.0, 0.3, false)
    );

    // Absent in 01-immediate, 5 in 01-settled: it appeared during the window.
    let before = dump("01-server-down-immediate/kube-apiserver-metrics.txt");
    let mut after = dump("01-server-down-settled/kube-apiserver-metrics.txt");
    apply_window(&before, &mut after, 30.0);
    let s = find(
        &after,
        "apiserver_request_terminations_total",
        &DISCOVERY_503,
    );
    assert_eq!(s.window.as_ref().unwrap().delta.unwrap().0, 5.0);
    // Gauges carry no window.
    let g = find(
        &after,
        "aggregator_unavailable_apiservice",
        &[("name", "v1.apps")],
    );
    assert!(g.window.is_none());
}

#[test]
fn the_real_restart_between_scenarios_is_seen_as_resets() {
    let before = dump("13-etcd-stalled/kube-apiserver-metrics.txt");
    let mut after = dump("20a-mutating-webhook-unreachable/kube-apiserver-metrics.txt");
    apply_window(&before, &mut after, 60.0);
    let (mut resets, mut counters) = (0, 0);
    for f in after.iter().filter(|f| f.kind == MetricKind::Counter) {
        let old = before.iter().find(|b| b.name == f.name);
        for s in &f.series {
            let w = s.window.as_ref().unwrap();
            let prev = old
                .and_then(|o| o.series.iter().find(|p| p.labels == s.labels))
                .and_then(|p| p.value);
            let now = s.value.unwrap().0;
            let fell = prev.is_some_and(|p| now < p.0);
            assert_eq!(w.reset, fell, "{} {:?}", f.name, s.labels);
            let expected = match prev {
                Some(p) if !fell => now - p.0,
                _ => now,
            };
            assert_eq!(w.delta.unwrap().0, expected);
            resets += usize::from(w.reset);
            counters += 1;
        }
    }
    assert!(
        resets > 100,
        "{resets} resets among {counters} counter series"
    );
    // The histograms restarted too: their windows count from zero.
    let h = after
        .iter()
        .find(|f| f.name == "apiserver_request_duration_seconds")
        .unwrap();
    assert!(h.series.iter().any(|s| s.window.as_ref().unwrap().reset));
}

#[test]
fn windowed_quantiles_of_a_real_histogram_stay_inside_its_buckets() {
    let before = dump("12-apf-queue-full/kube-apiserver-metrics.txt");
    let mut after = dump("13-etcd-stalled/kube-apiserver-metrics.txt");
    apply_window(&before, &mut after, 60.0);
    let h = after
        .iter()
        .find(|f| f.name == "apiserver_request_duration_seconds")
        .unwrap();
    let mut answered = 0;
    for s in &h.series {
        let w = s.window.as_ref().unwrap();
        assert!(!w.reset);
        let observed = w.count_delta.unwrap().0;
        assert_eq!(w.buckets.last().unwrap().count.0, observed);
        let Some(p99) = w.quantile(0.99) else {
            assert_eq!(observed, 0.0, "{:?}", s.labels);
            continue;
        };
        let highest = w.buckets[w.buckets.len() - 2].le.0;
        assert!((0.0..=highest).contains(&p99), "{p99} {:?}", s.labels);
        // The quantile since start is bounded the same way.
        assert!(histogram_quantile(0.99, &s.buckets).unwrap() <= highest);
        answered += 1;
    }
    assert!(answered > 0);
}
