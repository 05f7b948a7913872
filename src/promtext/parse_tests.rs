//! Edge cases of the text format 0.0.4 and of what real exporters emit, one behaviour per test.
//! The parser's own module docs say which behaviour is chosen where the spec leaves it open.

use super::*;

fn all(text: &str) -> Vec<MetricFamily> {
    parse_str(text, &Selection::all()).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}

fn fam<'a>(fams: &'a [MetricFamily], name: &str) -> &'a MetricFamily {
    fams.iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no family {name} in {:?}", names(fams)))
}

fn names(fams: &[MetricFamily]) -> Vec<&str> {
    fams.iter().map(|f| f.name.as_str()).collect()
}

fn labels(s: &MetricSeries) -> Vec<(&str, &str)> {
    s.labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn value(s: &MetricSeries) -> f64 {
    s.value.expect("a value").0
}

fn les(s: &MetricSeries) -> Vec<(f64, f64)> {
    s.buckets.iter().map(|b| (b.le.0, b.count.0)).collect()
}

#[test]
fn histograms_are_joined_and_help_is_unescaped() {
    let text = r#"# HELP h A \\ histogram\nwith two lines
# TYPE h histogram
h_bucket{a="x,y=}",le="0.1"} 1
h_bucket{a="x,y=}",le="+Inf"} 3
h_bucket{le="1",a="x,y=}"} 2
h_sum{a="x,y=}"} 1.5
h_count{a="x,y=}"} 3
other_metric 5
"#;
    let fams = parse_str(text, &Selection::names(["h"])).unwrap();
    assert_eq!(names(&fams), ["h"]);
    let h = &fams[0];
    assert_eq!(h.kind, MetricKind::Histogram);
    assert_eq!(h.help.as_deref(), Some("A \\ histogram\nwith two lines"));
    assert_eq!(h.series.len(), 1);
    let s = &h.series[0];
    assert_eq!(labels(s), [("a", "x,y=}")]);
    assert_eq!(les(s), [(0.1, 1.0), (1.0, 2.0), (f64::INFINITY, 3.0)]);
    assert_eq!(s.sum, Some(MetricValue(1.5)));
    assert_eq!(s.count, Some(MetricValue(3.0)));
    assert_eq!(s.value, None);
}

#[test]
fn whitespace_is_blanks_and_tabs_anywhere_between_tokens() {
    let fams = all("  \t a \t{ x = \"1\" ,\ty=\"2\" }\t 7 \t 1000 \t\n\n   \nb\t3\n");
    let a = &fam(&fams, "a").series[0];
    assert_eq!(labels(a), [("x", "1"), ("y", "2")]);
    assert_eq!((value(a), a.timestamp_ms), (7.0, Some(1000)));
    assert_eq!(value(&fam(&fams, "b").series[0]), 3.0);
    // No blank needed between `}` and the value (Prometheus accepts it too).
    assert_eq!(value(&all("c{x=\"1\"}4\n")[0].series[0]), 4.0);
}

#[test]
fn label_values_keep_escapes_and_delimiters() {
    let fams = all(concat!(
        r#"m{a="back\\slash",b="say \"hi\"",c="two\nlines",d="}{,=",e="\t stays"} 1"#,
        "\n"
    ));
    let s = &fams[0].series[0];
    assert_eq!(
        labels(s),
        [
            ("a", "back\\slash"),
            ("b", "say \"hi\""),
            ("c", "two\nlines"),
            ("d", "}{,="),
            ("e", "\\t stays"),
        ]
    );
}

#[test]
fn empty_label_set_trailing_comma_and_label_order_name_the_same_series() {
    let fams = all("a{} 1\na 2\nb{x=\"1\",y=\"2\",} 3\nb{y=\"2\", x=\"1\"} 4\nc{x=\"\"} 5\n");
    let a = fam(&fams, "a");
    assert_eq!(a.series.len(), 1, "a{{}} and a are one series");
    assert_eq!(value(&a.series[0]), 2.0, "the last line wins");
    let b = fam(&fams, "b");
    assert_eq!(b.series.len(), 1);
    assert_eq!(value(&b.series[0]), 4.0);
    // An empty label value is kept as written.
    assert_eq!(labels(&fam(&fams, "c").series[0]), [("x", "")]);
}

#[test]
fn special_values_exponents_and_timestamps() {
    let fams = all("a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne -2E+02\nf 3 -1500\ng 4 +1700000000000\n");
    assert!(value(&fam(&fams, "a").series[0]).is_nan());
    assert_eq!(value(&fam(&fams, "b").series[0]), f64::INFINITY);
    assert_eq!(value(&fam(&fams, "c").series[0]), f64::NEG_INFINITY);
    assert_eq!(value(&fam(&fams, "d").series[0]), 1.5e-3);
    assert_eq!(value(&fam(&fams, "e").series[0]), -200.0);
    assert_eq!(fam(&fams, "f").series[0].timestamp_ms, Some(-1500));
    assert_eq!(
        fam(&fams, "g").series[0].timestamp_ms,
        Some(1_700_000_000_000)
    );
    assert_eq!(fam(&fams, "a").series[0].timestamp_ms, None);
}

#[test]
fn type_after_samples_and_untyped_families() {
    let fams =
        all("c 1\n# TYPE c counter\nc 2\nu 3\n# TYPE v untyped\nv 4\n# TYPE w unknown\nw 5\n");
    let c = fam(&fams, "c");
    assert_eq!((c.kind, c.series.len()), (MetricKind::Counter, 1));
    assert_eq!(value(&c.series[0]), 2.0);
    for n in ["u", "v", "w"] {
        assert_eq!(fam(&fams, n).kind, MetricKind::Untyped, "{n}");
    }
}

#[test]
fn a_counter_named_total_is_its_own_family() {
    let fams = all("# TYPE req_total counter\nreq_total{code=\"200\"} 9\n");
    assert_eq!(names(&fams), ["req_total"]);
    assert_eq!(fams[0].kind, MetricKind::Counter);
    // `_count`/`_sum` of a counter or gauge are names of their own, not joined.
    let fams = all("# TYPE x gauge\nx 1\nx_count 2\n");
    assert_eq!(names(&fams), ["x", "x_count"]);
    assert_eq!(fams[1].kind, MetricKind::Untyped);
}

#[test]
fn summaries_keep_one_series_per_quantile_plus_sum_and_count() {
    let text = r#"# HELP go_gc_duration_seconds A summary of the pause duration.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1.6e-05
go_gc_duration_seconds{quantile="0.5"} 3.1e-05
go_gc_duration_seconds{quantile="1"} 0.000225
go_gc_duration_seconds_sum 0.0123
go_gc_duration_seconds_count 311
go_gc_duration_seconds_bucket 1
"#;
    let fams = all(text);
    let s = fam(&fams, "go_gc_duration_seconds");
    assert_eq!(s.kind, MetricKind::Summary);
    assert_eq!(s.series.len(), 4);
    assert_eq!(labels(&s.series[1]), [("quantile", "0.5")]);
    assert_eq!(value(&s.series[1]), 3.1e-05);
    let total = &s.series[3];
    assert!(total.labels.is_empty());
    assert_eq!(
        (total.sum, total.count),
        (Some(MetricValue(0.0123)), Some(MetricValue(311.0)))
    );
    // A summary has no buckets: `_bucket` is a family of its own.
    assert_eq!(
        fam(&fams, "go_gc_duration_seconds_bucket").kind,
        MetricKind::Untyped
    );
}

#[test]
fn le_is_compared_as_a_number_and_duplicate_buckets_keep_the_last() {
    let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"1.0\"} 2\nh_bucket{le=\"1e+00\"} 3\nh_bucket{le=\"+Inf\"} 4\nh_bucket{le=\"0.5\"} 0\nh_bucket{le=\"Inf\"} 5\nh_bucket{le=\"0\"} 6\nh_bucket{le=\"-0\"} 7\n";
    let s = &all(text)[0].series[0];
    assert_eq!(
        les(s),
        [(0.0, 7.0), (0.5, 0.0), (1.0, 3.0), (f64::INFINITY, 5.0)],
        "-0 and 0 are one bucket (found by the long property run)"
    );
}

#[test]
fn histogram_lines_before_their_type_are_joined_when_it_comes() {
    let text = "h_bucket{a=\"1\",le=\"1\"} 1\nh_bucket{a=\"1\",le=\"+Inf\"} 2\nh_sum{a=\"1\"} 0.5\n# HELP h late help\n# TYPE h histogram\nh_count{a=\"1\"} 2\nh_bucket{a=\"1\",le=\"2\"} 2\n";
    let fams = parse_str(text, &Selection::names(["h"])).unwrap();
    assert_eq!(names(&fams), ["h"]);
    let h = &fams[0];
    assert_eq!(
        (h.kind, h.help.as_deref()),
        (MetricKind::Histogram, Some("late help"))
    );
    assert_eq!(h.series.len(), 1);
    let s = &h.series[0];
    assert_eq!(labels(s), [("a", "1")]);
    assert_eq!(les(s), [(1.0, 1.0), (2.0, 2.0), (f64::INFINITY, 2.0)]);
    assert_eq!(
        (s.sum, s.count),
        (Some(MetricValue(0.5)), Some(MetricValue(2.0)))
    );
    // Selecting everything gives the same single family, not h_bucket/h_sum leftovers.
    assert_eq!(names(&all(text)), ["h"]);
    // Not selected: the early lines are dropped with the rest.
    assert!(
        parse_str(text, &Selection::names(["x"]))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn suffixed_lines_whose_type_never_comes_stay_untyped_families() {
    let text = "h_bucket{le=\"1\"} 1\nh_sum 2\nh 3\n";
    // Only `h` was selected, and `h` turned out to be an untyped family of its own.
    let fams = parse_str(text, &Selection::names(["h"])).unwrap();
    assert_eq!(names(&fams), ["h"]);
    let fams = parse_str(text, &Selection::names(["h_bucket"])).unwrap();
    assert_eq!(names(&fams), ["h_bucket"]);
    assert_eq!(labels(&fams[0].series[0]), [("le", "1")]);
    // The TYPE of `h` came, but as a gauge: `h_sum` is still not part of it.
    let fams = parse_str(
        "h_sum 2\n# TYPE h gauge\nh 3\nh_sum 4\n",
        &Selection::names(["h"]),
    );
    assert_eq!(names(&fams.unwrap()), ["h"]);
}

// `/metrics` dumps saved by hand are input to raw import (`bundle/raw/metrics_dump.rs`): one saved
// on Windows has `\r\n`, one cut short has no final newline. Neither is in the spec; both parse.
#[test]
fn crlf_and_a_last_line_without_newline() {
    let fams = all("# TYPE a counter\r\na{x=\"1\"} 1\r\n\r\nb 2");
    assert_eq!(fam(&fams, "a").kind, MetricKind::Counter);
    assert_eq!(labels(&fam(&fams, "a").series[0]), [("x", "1")]);
    assert_eq!(value(&fam(&fams, "b").series[0]), 2.0);
    let err = parse_str("a 1\nb 2 x", &Selection::all()).unwrap_err();
    assert_eq!(err.line, 2);
}

// A stray byte in a family the rules never read (a HELP text, a label of some other component's
// metric) must not cost the whole scrape; in a selected family it is an error naming the line.
#[test]
fn invalid_utf8_is_an_error_only_in_selected_families() {
    let mut body = b"# HELP a caf\xe9\nok 1\nbad{x=\"\xff\"} 1\n".to_vec();
    let sel = Selection::names(["ok"]);
    let mut p = Parser::new(&sel);
    p.feed(&body).unwrap();
    assert_eq!(names(&p.finish().unwrap()), ["ok"]);

    let sel = Selection::names(["bad"]);
    let mut p = Parser::new(&sel);
    let err = p.feed(&body).unwrap_err();
    assert_eq!((err.line, err.kind), (3, ParseErrorKind::Syntax));
    assert!(err.message.contains("UTF-8"), "{err}");

    body.splice(0..0, b"# TYPE a gauge\n".iter().copied());
    let sel = Selection::names(["a"]);
    let mut p = Parser::new(&sel);
    let err = p.feed(&body).unwrap_err();
    assert_eq!(err.line, 2, "{err}");
}

#[test]
fn every_malformed_selected_line_is_an_error_naming_it() {
    let cases: &[(&str, &str)] = &[
        ("a{x=\"1} 2", "not closed"),
        ("a{x=\"1\" 2", "expected ','"),
        ("a{x=1} 2", "not quoted"),
        ("a{x=\"1\",x=\"2\"} 2", "given twice"),
        ("a{1x=\"1\"} 2", "invalid label name"),
        ("a", "missing value"),
        ("a{}", "missing value"),
        ("a one", "invalid value"),
        ("a 1 2 3", "unexpected \"3\""),
        ("a 1 1.5", "invalid timestamp"),
        ("a 1 # comment", "invalid timestamp"),
        ("# TYPE h histogram\nh_bucket 1", "without an le"),
        ("# TYPE h histogram\nh_bucket{le=\"x\"} 1", "invalid le"),
        ("# TYPE h histogram\nh_bucket{le=\"NaN\"} 1", "invalid le"),
        (
            "# TYPE h histogram\nh_bucket{le=\"1\",le=\"2\"} 1",
            "\"le\" given twice",
        ),
        ("# TYPE h histogram\nh 1", "needs a _bucket"),
        ("h 1\n# TYPE h histogram", "comes after samples"),
        ("# TYPE a counter\n# TYPE a gauge", "contradicts"),
        ("# TYPE a countr", "unknown metric type"),
        ("# TYPE h histogram\nh_bucket{le=\"1\"} 1\n", ""),
    ];
    for (body, want) in cases {
        let text = format!("# a comment\n\n{body}\n");
        let result = parse_str(&text, &Selection::names(["a", "h"]));
        if want.is_empty() {
            assert!(result.is_ok(), "{body}: {result:?}");
            continue;
        }
        let err = result.unwrap_err();
        assert_eq!(err.line, text.lines().count(), "{body}: {err}");
        assert!(err.message.contains(want), "{body}: {err}");
        assert_eq!(err.kind, ParseErrorKind::Syntax);
        // Unselected, the same lines are never looked at past the metric name.
        assert!(
            parse_str(&text, &Selection::names(["zzz"])).is_ok(),
            "{body} should be skipped when not selected"
        );
    }
}

#[test]
fn a_line_whose_name_cannot_be_read_is_an_error_whatever_the_selection() {
    for body in [
        "9a 1",
        "{x=\"1\"} 2",
        "a-b 1",
        "a=1",
        "\u{e9}t\u{e9} 1",
        "# TYPE 9x counter",
    ] {
        let err = parse_str(&format!("ok 1\n{body}\n"), &Selection::names(["ok"])).unwrap_err();
        assert_eq!(err.line, 2, "{body}");
        assert!(err.message.contains("invalid metric name"), "{body}: {err}");
    }
    // Plain comments, HELP/TYPE alone, and unknown types of unselected families are fine.
    let ok = "# just words\n#\n# TYPE\n# HELP\n# TYPE z countr\n# HELP z caf\\q\n";
    assert!(parse_str(ok, &Selection::names(["a"])).unwrap().is_empty());
}

#[test]
fn duplicate_lines_keep_the_last_value_and_timestamp() {
    let fams = all("a{x=\"1\"} 1 100\na{x=\"2\"} 5\na{x=\"1\"} 2 200\na{x=\"1\"} 3\n");
    let a = &fams[0];
    assert_eq!(a.series.len(), 2);
    assert_eq!(value(&a.series[0]), 3.0);
    // A line without a timestamp does not erase the one given before.
    assert_eq!(a.series[0].timestamp_ms, Some(200));
}

#[test]
fn prefixes_select_families_and_order_is_first_appearance() {
    let text = "b_x 1\na_y 2\nb_z 3\nc 4\nb_x 5\n";
    let sel = Selection::names(["c"]).with_prefix("b_");
    let fams = parse_str(text, &sel).unwrap();
    assert_eq!(names(&fams), ["b_x", "b_z", "c"]);
    assert_eq!(value(&fams[0].series[0]), 5.0);
}

// An HTTP body arrives in chunks cut anywhere (inside a label value, between `\r` and `\n`, inside
// a multi-byte character); every cut must give the same families as the whole text.
#[test]
fn chunk_boundaries_anywhere_give_the_same_result() {
    let text = "# HELP h doc\\n\n# TYPE h histogram\r\nh_bucket{a=\"x\\\"y\",le=\"1\"} 1\nh_bucket{a=\"x\\\"y\",le=\"+Inf\"} 2\nh_sum{a=\"x\\\"y\"} 3\nh_count{a=\"x\\\"y\"} 2\nc{e=\"é\"} 1\ng 5 -7";
    let want = all(text);
    let sel = Selection::all();
    for size in 1..text.len() {
        let mut p = Parser::new(&sel);
        for chunk in text.as_bytes().chunks(size) {
            p.feed(chunk).unwrap();
        }
        assert_eq!(p.finish().unwrap(), want, "chunks of {size}");
    }
    let mut p = Parser::new(&sel);
    for line in text.split_inclusive('\n') {
        p.push_line(line).unwrap();
    }
    assert_eq!(p.finish().unwrap(), want);
}

#[test]
fn limits_cap_the_body_and_the_line() {
    let sel = Selection::all();
    let limits = Limits {
        max_body_bytes: Some(10),
        ..Limits::default()
    };
    let mut p = Parser::with_limits(&sel, limits);
    p.feed(b"a 1\nb 2\n").unwrap();
    let err = p.feed(b"c 3\n").unwrap_err();
    assert_eq!((err.kind, err.line), (ParseErrorKind::TooLarge, 3));

    let limits = Limits {
        max_line_bytes: 8,
        ..Limits::default()
    };
    let mut p = Parser::with_limits(&sel, limits);
    p.feed(b"a 1\nbb 2").unwrap();
    let err = p.feed(b"222222\n").unwrap_err();
    assert_eq!((err.kind, err.line), (ParseErrorKind::TooLarge, 2));
    let mut p = Parser::with_limits(&sel, limits);
    let err = p.feed(b"a 1\nlong_name_here 1\n").unwrap_err();
    assert_eq!((err.kind, err.line), (ParseErrorKind::TooLarge, 2));
}

#[test]
fn errors_print_the_line_number() {
    let err = parse_str("a 1\nb x\n", &Selection::all()).unwrap_err();
    assert_eq!(err.to_string(), "line 2: b: invalid value \"x\"");
}
