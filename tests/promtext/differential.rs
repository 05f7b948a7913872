//! Differential test against prometheus-parse 0.2.5 on the real dumps: same families, same series
//! label sets, same values (bit for bit, NaN equal to NaN), same HELP.
//!
//! Only what prometheus-parse handles correctly is compared (STACK.md §3 lists its bugs): lines with
//! escapes, label values containing `,` `=` `}`, empty label sets `{}` and names with `:` are
//! filtered out of its input and out of ours alike, and HELP texts with backslashes are not
//! compared (it does not unescape them) and are compared without trailing blanks (it trims them). Its shape is mapped onto ours: it returns histogram
//! `_sum`/`_count` and summary `_sum`/`_count` as separate untyped samples, and summaries as one
//! sample holding all quantiles.

use std::collections::BTreeMap;

use extpath::promtext::{MetricFamily, MetricKind, Selection, parse_str};
use prometheus_parse::{Scrape, Value};

type Labels = Vec<(String, String)>;

/// One comparable observation: what kind and value(s) a (name, labels) pair has.
#[derive(Debug, Clone, PartialEq)]
enum Obs {
    Scalar(&'static str, u64),
    Buckets(Vec<(u64, u64)>),
    Quantiles(Vec<(u64, u64)>),
}

fn bits(v: f64) -> u64 {
    // All NaNs compare equal; everything else bit for bit.
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

fn kind_name(k: MetricKind) -> &'static str {
    match k {
        MetricKind::Counter => "counter",
        MetricKind::Gauge => "gauge",
        MetricKind::Untyped => "untyped",
        MetricKind::Histogram => "histogram",
        MetricKind::Summary => "summary",
    }
}

/// Whether prometheus-parse reads this line correctly.
fn pp_handles(line: &str) -> bool {
    let t = line.trim_start();
    if t.starts_with('#') {
        return true;
    }
    let name_end = t.find(['{', ' ']).unwrap_or(t.len());
    if t[..name_end].contains(':') || t.contains('\\') || t.contains("{}") {
        return false;
    }
    // A quoted label value holding one of its separators.
    let mut in_quotes = false;
    for c in t.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            ',' | '=' | '}' | '{' if in_quotes => return false,
            _ => {}
        }
    }
    true
}

fn sorted(labels: impl IntoIterator<Item = (String, String)>) -> Labels {
    let mut l: Labels = labels.into_iter().collect();
    l.sort();
    l
}

fn from_ours(fams: &[MetricFamily]) -> BTreeMap<(String, Labels), Obs> {
    let mut out = BTreeMap::new();
    for f in fams {
        for s in &f.series {
            let labels = sorted(s.labels.clone());
            fn put(out: &mut BTreeMap<(String, Labels), Obs>, name: String, l: Labels, obs: Obs) {
                assert!(out.insert((name, l), obs).is_none(), "duplicate");
            }
            match f.kind {
                MetricKind::Histogram => {
                    let b = s.buckets.iter().map(|b| (bits(b.le.0), bits(b.count.0)));
                    put(
                        &mut out,
                        f.name.clone(),
                        labels.clone(),
                        Obs::Buckets(b.collect()),
                    );
                }
                MetricKind::Summary if s.labels.contains_key("quantile") => {
                    let q = s.labels["quantile"].parse::<f64>().unwrap();
                    let rest = sorted(
                        s.labels
                            .clone()
                            .into_iter()
                            .filter(|(k, _)| k != "quantile"),
                    );
                    let v = bits(s.value.unwrap().0);
                    match out
                        .entry((f.name.clone(), rest))
                        .or_insert_with(|| Obs::Quantiles(Vec::new()))
                    {
                        Obs::Quantiles(qs) => qs.push((bits(q), v)),
                        other => panic!("{other:?}"),
                    }
                    continue;
                }
                MetricKind::Summary => {}
                k => put(
                    &mut out,
                    f.name.clone(),
                    labels.clone(),
                    Obs::Scalar(kind_name(k), bits(s.value.unwrap().0)),
                ),
            }
            if let Some(sum) = s.sum {
                put(
                    &mut out,
                    format!("{}_sum", f.name),
                    labels.clone(),
                    Obs::Scalar("untyped", bits(sum.0)),
                );
            }
            if let Some(count) = s.count {
                put(
                    &mut out,
                    format!("{}_count", f.name),
                    labels,
                    Obs::Scalar("untyped", bits(count.0)),
                );
            }
        }
    }
    out
}

fn from_pp(scrape: &Scrape) -> BTreeMap<(String, Labels), Obs> {
    let mut out = BTreeMap::new();
    for s in &scrape.samples {
        let labels = sorted(s.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        let obs = match &s.value {
            Value::Counter(v) => Obs::Scalar("counter", bits(*v)),
            Value::Gauge(v) => Obs::Scalar("gauge", bits(*v)),
            Value::Untyped(v) => Obs::Scalar("untyped", bits(*v)),
            Value::Histogram(hs) => {
                let mut b: Vec<_> = hs.iter().map(|h| (h.less_than, h.count)).collect();
                b.sort_by(|x, y| x.0.total_cmp(&y.0));
                Obs::Buckets(b.into_iter().map(|(l, c)| (bits(l), bits(c))).collect())
            }
            Value::Summary(qs) => Obs::Quantiles(
                qs.iter()
                    .map(|q| (bits(q.quantile), bits(q.count)))
                    .collect(),
            ),
        };
        assert!(
            out.insert((s.metric.clone(), labels), obs).is_none(),
            "prometheus-parse gave a duplicate {}",
            s.metric
        );
    }
    out
}

/// The dumps compared. prometheus-parse is slow in a debug build (≈2.5 MB/s), and the dumps differ
/// mostly in counter values; these cover kube-apiserver before and after its restart, the main
/// etcd and the extension's etcd. Every dump is parsed by our parser in `real_dumps`.
const COMPARED: [&str; 4] = [
    "00-healthy/kube-apiserver-metrics.txt",
    "20a-mutating-webhook-unreachable/kube-apiserver-metrics.txt",
    "00-healthy/etcd-main-metrics.txt",
    "00-healthy/etcd-wardle-metrics.txt",
];

#[test]
fn same_families_series_values_and_help_as_prometheus_parse_on_real_dumps() {
    let mut compared = 0usize;
    let mut skipped_lines = 0usize;
    let mut total_lines = 0usize;
    for path in COMPARED.map(|p| crate::util::repo().join("fixtures/raw").join(p)) {
        let text = super::read(&path);
        total_lines += text.lines().count();
        let kept: Vec<&str> = text.lines().filter(|l| pp_handles(l)).collect();
        skipped_lines += text.lines().count() - kept.len();
        let filtered = kept.join("\n");

        let ours = parse_str(&filtered, &Selection::all())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let theirs = Scrape::parse(kept.iter().map(|l| Ok(l.to_string()))).unwrap();
        let (a, b) = (from_ours(&ours), from_pp(&theirs));
        let only_ours: Vec<_> = a.keys().filter(|k| !b.contains_key(*k)).take(3).collect();
        let only_theirs: Vec<_> = b.keys().filter(|k| !a.contains_key(*k)).take(3).collect();
        assert!(
            only_ours.is_empty() && only_theirs.is_empty(),
            "{}: series only in ours {only_ours:?}, only in prometheus-parse {only_theirs:?}",
            path.display()
        );
        for (k, v) in &a {
            assert_eq!(v, &b[k], "{}: {k:?}", path.display());
        }
        compared += a.len();

        let mut helps = 0;
        for f in &ours {
            let Some(doc) = theirs.docs.get(&f.name) else {
                assert!(f.help.is_none(), "{}: HELP of {}", path.display(), f.name);
                continue;
            };
            if !doc.contains('\\') {
                // It trims the line, so `[ALPHA] ` (the real text, kept by us) reads `[ALPHA]`.
                let ours = f.help.as_deref().map(str::trim_end);
                assert_eq!(ours, Some(doc.as_str()), "{}", f.name);
                helps += 1;
            }
        }
        assert!(
            helps > 10,
            "{}: only {helps} HELP texts compared",
            path.display()
        );
    }
    // The comparison must have covered the dumps, not a filtered-away remainder.
    assert!(compared > 5_000, "only {compared} series compared");
    // What is filtered out is `rest_client_request_duration_seconds{url="…?limit=%7Bvalue%7D…"}`:
    // real label values with `=` that prometheus-parse drops.
    assert!(
        skipped_lines * 20 < total_lines,
        "{skipped_lines} of {total_lines} lines were filtered out"
    );
}

#[test]
fn the_filter_only_removes_what_prometheus_parse_gets_wrong() {
    // Each line the filter drops is one prometheus-parse really mangles, and each kind of line it
    // keeps it really reads: the filter is not hiding disagreements.
    let mangled = [
        r#"m{a="has,comma"} 1"#,
        r#"m{a="has=eq"} 1"#,
        r#"m{a="br}ace"} 1"#,
        r#"m{a="say \"hi\""} 1"#,
        "m{} 1",
        "m:rate 1",
    ];
    for line in mangled {
        assert!(!pp_handles(line), "{line}");
        let ours = parse_str(line, &Selection::all()).unwrap();
        let theirs = Scrape::parse(std::iter::once(Ok(line.to_string()))).unwrap();
        assert_ne!(
            from_ours(&ours),
            from_pp(&theirs),
            "{line} is not mangled after all"
        );
    }
    let fine = r#"m{a="plain",b=""} 1 1700000000000"#;
    assert!(pp_handles(fine));
    let ours = parse_str(fine, &Selection::all()).unwrap();
    let theirs = Scrape::parse(std::iter::once(Ok(fine.to_string()))).unwrap();
    assert_eq!(from_ours(&ours), from_pp(&theirs));
}
