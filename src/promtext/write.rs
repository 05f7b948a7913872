//! The inverse of the parser: [`MetricFamily`]s back to Prometheus text exposition (format 0.0.4),
//! and the first of the two scrapes a windowed family was computed from.
//!
//! Why it exists: a replayed recording (`replay serve --bundle`) serves the metrics a bundle holds
//! at `/metrics`, and a collection against it must read back exactly what was recorded. So the
//! contract is the parser's, not a pretty exporter's: `parse(write(f)) == f` for every family the
//! parser can produce (a family without series is its `# TYPE` line alone, which the parser reads
//! back as such). Values are written with the shortest decimal that reads back to the same `f64`;
//! label values and HELP text are escaped the way the lexer unescapes them.
//!
//! [`window_start`] answers the other half of a windowed recording: given the families of the
//! later scrape with their window deltas, the families of the earlier scrape, chosen so that
//! [`apply_window`](super::apply_window) over the two gives back the recorded deltas — exactly for
//! counts, within an ulp of the value for fractional sums (see [`before`]). Rates are not
//! reproduced: they are the deltas over the window's length, and a replay's window is as long as
//! its client makes it.
//!
//! This module knows nothing of bundles or servers.

use std::fmt::Write as _;

use super::model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue};

/// A sample value as the lexer reads it: `NaN`, `+Inf`, `-Inf`, an integer when the value is one
/// (what exporters print), else the shortest round-tripping decimal (exponent form for very large
/// or small magnitudes, which the lexer accepts).
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        // `as` is exact below 2^53; -0.0 becomes "0", which reads back equal. Below 1e15 the
        // integer has at most 15 digits, the lexer's exact fast path for counters.
        return format!("{}", v as i64);
    }
    format!("{v:?}")
}

fn escape_label_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// One sample line: `name{labels[,le="…"]} value[ timestamp]`.
fn sample(
    out: &mut String,
    name: &str,
    series: &MetricSeries,
    le: Option<MetricValue>,
    value: MetricValue,
) {
    out.push_str(name);
    if !series.labels.is_empty() || le.is_some() {
        out.push('{');
        let mut first = true;
        for (k, v) in &series.labels {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(v, out);
            out.push('"');
        }
        // `le` last, where client_golang puts it: the parser takes a last `le` off without
        // re-keying the series, so a written recording parses on the cheap path.
        if let Some(le) = le {
            if !first {
                out.push(',');
            }
            let _ = write!(out, "le=\"{}\"", format_value(le.0));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_value(value.0));
    if let Some(ts) = series.timestamp_ms {
        let _ = write!(out, " {ts}");
    }
    out.push('\n');
}

/// Write one family: its HELP and TYPE, then its samples.
pub fn write_family(out: &mut String, family: &MetricFamily) {
    let name = &family.name;
    if let Some(help) = &family.help {
        let _ = write!(out, "# HELP {name} ");
        escape_help(help, out);
        out.push('\n');
    }
    let _ = writeln!(out, "# TYPE {name} {}", family.kind.as_str());
    for s in &family.series {
        if let Some(v) = s.value {
            sample(out, name, s, None, v);
        }
        for b in &s.buckets {
            sample(out, &format!("{name}_bucket"), s, Some(b.le), b.count);
        }
        if let Some(v) = s.sum {
            sample(out, &format!("{name}_sum"), s, None, v);
        }
        if let Some(v) = s.count {
            sample(out, &format!("{name}_count"), s, None, v);
        }
    }
}

/// The text exposition of `families`, in their order.
pub fn write_text(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for f in families {
        write_family(&mut out, f);
    }
    out
}

/// The value `b` for which `after - b` comes closest to `delta` in floating point: exactly
/// `delta` when some `b` near `after - delta` gives it (the plain subtraction usually does; when
/// its rounding misses, a neighbour may not). When `delta` is finer than the spacing of doubles
/// around `after` (0.5 − b can never be the double nearest 0.1), the closest difference is within
/// an ulp of `after`, and that is what a reader of the two scrapes gets back.
pub fn before(after: f64, delta: f64) -> f64 {
    let first = after - delta;
    if !first.is_finite() || after - first == delta {
        return first;
    }
    let miss = |b: f64| ((after - b) - delta).abs();
    let (mut best, mut down, mut up) = (first, first, first);
    for _ in 0..16 {
        down = down.next_down();
        up = up.next_up();
        for candidate in [down, up] {
            if miss(candidate) < miss(best) {
                best = candidate;
            }
        }
        if miss(best) == 0.0 {
            break;
        }
    }
    best
}

/// The earlier scrape of a series, or `None` when the series is best left out of it (it then
/// counts from zero, which is exact when every delta equals its value).
fn series_before(kind: MetricKind, s: &MetricSeries) -> Option<MetricSeries> {
    let Some(w) = &s.window else {
        return Some(s.clone());
    };
    let mut b = s.clone();
    b.window = None;
    match kind {
        MetricKind::Counter => {
            let now = s.value?.0;
            let delta = w.delta.map_or(0.0, |d| d.0);
            if w.reset {
                // Higher than now: the later scrape reads as a restart, counted from zero. The
                // `+ 1` keeps it strictly higher when both are 0 (a restart with no traffic yet).
                b.value = Some(MetricValue(now.abs() + delta.abs() + 1.0));
            } else if delta == now {
                // Counting from zero gives exactly `now`, so absence is the exact earlier scrape
                // (a series created during the window, as client libraries do on first use).
                return None;
            } else {
                b.value = Some(MetricValue(before(now, delta)));
            }
        }
        MetricKind::Histogram | MetricKind::Summary => {
            let window_bucket = |le: MetricValue| {
                w.buckets
                    .iter()
                    .find(|x| x.le == le)
                    .map_or(0.0, |x| x.count.0)
            };
            if w.reset {
                // A `_count` that fell marks the restart; every delta then counts from zero.
                let count = s.count.map_or(0.0, |c| c.0);
                b.count = Some(MetricValue(count.abs() + 1.0));
                return Some(b);
            }
            let counts_from_zero = s.buckets.iter().all(|x| window_bucket(x.le) == x.count.0)
                && s.sum.map(|v| v.0) == w.sum_delta.map(|v| v.0).or(s.sum.map(|_| 0.0))
                && s.count.map(|v| v.0) == w.count_delta.map(|v| v.0).or(s.count.map(|_| 0.0));
            if counts_from_zero {
                return None;
            }
            b.buckets = s
                .buckets
                .iter()
                .map(|x| Bucket {
                    le: x.le,
                    count: MetricValue(before(x.count.0, window_bucket(x.le))),
                })
                .collect();
            b.sum = s
                .sum
                .map(|v| MetricValue(before(v.0, w.sum_delta.map_or(0.0, |d| d.0))));
            b.count = s
                .count
                .map(|v| MetricValue(before(v.0, w.count_delta.map_or(0.0, |d| d.0))));
        }
        MetricKind::Gauge | MetricKind::Untyped => {}
    }
    Some(b)
}

/// The families of the earlier of the two scrapes that `after` (families carrying window deltas)
/// was computed from: applying the window to the two gives back the recorded deltas. Gauges and
/// series without a window are the same in both scrapes.
pub fn window_start(after: &[MetricFamily]) -> Vec<MetricFamily> {
    after
        .iter()
        .map(|f| MetricFamily {
            name: f.name.clone(),
            kind: f.kind,
            help: f.help.clone(),
            series: f
                .series
                .iter()
                .filter_map(|s| series_before(f.kind, s))
                .map(|mut s| {
                    s.window = None;
                    s
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promtext::{Selection, SeriesWindow, apply_window, parse_str};

    fn all() -> Selection {
        Selection::all()
    }

    fn series(labels: &[(&str, &str)]) -> MetricSeries {
        MetricSeries {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..MetricSeries::default()
        }
    }

    fn families() -> Vec<MetricFamily> {
        let mut c = series(&[("code", "503"), ("odd", "a\"b\\c\nd,e=f}")]);
        c.value = Some(MetricValue(17.0));
        let mut c2 = series(&[("code", "")]);
        c2.value = Some(MetricValue(0.1 + 0.2));
        c2.timestamp_ms = Some(1_700_000_000_123);
        let mut g = series(&[]);
        g.value = Some(MetricValue(f64::NAN));
        let mut h = series(&[("verb", "LIST")]);
        h.buckets = vec![
            Bucket {
                le: MetricValue(0.005),
                count: MetricValue(3.0),
            },
            Bucket {
                le: MetricValue(1e-7),
                count: MetricValue(1.0),
            },
            Bucket {
                le: MetricValue(f64::INFINITY),
                count: MetricValue(9.0),
            },
        ];
        h.buckets.sort_by(|a, b| a.le.0.total_cmp(&b.le.0));
        h.sum = Some(MetricValue(12.25));
        h.count = Some(MetricValue(9.0));
        let mut q = series(&[("quantile", "0.99")]);
        q.value = Some(MetricValue(2e20));
        let mut qs = series(&[]);
        qs.sum = Some(MetricValue(-1.5));
        qs.count = Some(MetricValue(4.0));
        vec![
            MetricFamily {
                name: "apiserver_request_total".into(),
                kind: MetricKind::Counter,
                help: Some("a \\ help\nwith a newline".into()),
                series: vec![c, c2],
            },
            MetricFamily {
                name: "etcd_server_has_leader".into(),
                kind: MetricKind::Gauge,
                help: Some(String::new()),
                series: vec![g],
            },
            MetricFamily {
                name: "etcd_request_duration_seconds".into(),
                kind: MetricKind::Histogram,
                help: None,
                series: vec![h],
            },
            MetricFamily {
                name: "some_summary".into(),
                kind: MetricKind::Summary,
                help: None,
                series: vec![q, qs],
            },
            MetricFamily {
                name: "plain".into(),
                kind: MetricKind::Untyped,
                help: None,
                series: vec![{
                    let mut s = series(&[]);
                    s.value = Some(MetricValue(f64::NEG_INFINITY));
                    s
                }],
            },
        ]
    }

    fn same(a: &[MetricFamily], b: &[MetricFamily]) -> bool {
        // NaN != NaN: compare the serialised forms, which spell NaN as a string.
        serde_json::to_string(a).unwrap() == serde_json::to_string(b).unwrap()
    }

    #[test]
    fn written_families_parse_back_unchanged() {
        let fams = families();
        let text = write_text(&fams);
        let back = parse_str(&text, &all()).unwrap();
        assert!(same(&fams, &back), "{text}\n{back:#?}");
    }

    #[test]
    fn a_family_without_series_reads_back_as_one() {
        let f = MetricFamily {
            name: "x".into(),
            kind: MetricKind::Counter,
            help: Some("h".into()),
            series: vec![],
        };
        let text = write_text(std::slice::from_ref(&f));
        assert_eq!(text, "# HELP x h\n# TYPE x counter\n");
        assert_eq!(parse_str(&text, &all()).unwrap(), vec![f]);
    }

    #[test]
    fn values_are_written_in_their_shortest_exact_form() {
        for v in [
            0.0,
            1.0,
            -3.0,
            0.1,
            1e-7,
            123456.789,
            2e20,
            9.007199254740993e15,
        ] {
            let text = format_value(v);
            assert_eq!(text.parse::<f64>().unwrap(), v, "{text}");
        }
        assert_eq!(format_value(5.0), "5");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
    }

    #[test]
    fn the_earlier_value_is_the_closest_one() {
        assert_eq!(before(10.0, 3.0), 7.0);
        // 0.7 - (0.7 - 0.1) is 0.09999999999999998; no double b gives 0.7 - b == 0.1 exactly
        // (0.1 is finer than the doubles near 0.6), so the best is within an ulp of 0.7.
        let b = before(0.7, 0.1);
        assert!(((0.7 - b) - 0.1).abs() <= f64::EPSILON * 0.7, "{b}");
        assert_eq!(0.3 - before(0.3, 0.1), 0.1);
    }

    #[test]
    fn the_start_of_a_window_gives_back_its_deltas() {
        let text = "# TYPE c counter\nc{a=\"1\"} 10\nc{a=\"2\"} 5\nc{a=\"3\"} 0.5\n\
                    # TYPE h histogram\nh_bucket{le=\"0.1\"} 2\nh_bucket{le=\"+Inf\"} 4\nh_sum 0.5\nh_count 4\n\
                    # TYPE g gauge\ng 3\n";
        let mut after = parse_str(text, &all()).unwrap();
        let recorded = [
            SeriesWindow {
                delta: Some(MetricValue(4.0)),
                ..SeriesWindow::default()
            },
            SeriesWindow {
                delta: Some(MetricValue(5.0)),
                ..SeriesWindow::default()
            },
            SeriesWindow {
                delta: Some(MetricValue(0.1)),
                ..SeriesWindow::default()
            },
        ];
        for (s, w) in after[0].series.iter_mut().zip(recorded) {
            s.window = Some(w);
        }
        after[1].series[0].window = Some(SeriesWindow {
            buckets: vec![
                Bucket {
                    le: MetricValue(0.1),
                    count: MetricValue(1.0),
                },
                Bucket {
                    le: MetricValue(f64::INFINITY),
                    count: MetricValue(1.0),
                },
            ],
            sum_delta: Some(MetricValue(0.1)),
            count_delta: Some(MetricValue(1.0)),
            delta: Some(MetricValue(1.0)),
            ..SeriesWindow::default()
        });
        let start = window_start(&after);
        let first = parse_str(&write_text(&start), &all()).unwrap();
        let mut second = parse_str(&write_text(&after), &all()).unwrap();
        apply_window(&first, &mut second, 60.0);
        for (f, g) in after.iter().zip(&second) {
            for (s, t) in f.series.iter().zip(&g.series) {
                let (a, b) = (s.window.clone(), t.window.clone());
                let numbers = |w: Option<SeriesWindow>| {
                    let w = w.unwrap_or_default();
                    let mut v: Vec<f64> = w.buckets.iter().map(|b| b.count.0).collect();
                    v.extend(
                        [w.delta, w.sum_delta, w.count_delta]
                            .iter()
                            .flatten()
                            .map(|x| x.0),
                    );
                    v
                };
                let (a, b) = (numbers(a), numbers(b));
                assert_eq!(a.len(), b.len(), "{}", f.name);
                for (x, y) in a.iter().zip(&b) {
                    assert!(
                        (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                        "{}: {x} vs {y}",
                        f.name
                    );
                }
            }
        }
    }

    #[test]
    fn a_restart_is_replayed_as_one() {
        let mut after = parse_str("# TYPE c counter\nc 3\n", &all()).unwrap();
        after[0].series[0].window = Some(SeriesWindow {
            delta: Some(MetricValue(3.0)),
            reset: true,
            ..SeriesWindow::default()
        });
        let first = window_start(&after);
        let mut second = after.clone();
        apply_window(&first, &mut second, 1.0);
        let w = second[0].series[0].window.clone().unwrap();
        assert!(w.reset);
        assert_eq!(w.delta, Some(MetricValue(3.0)));
    }
}
