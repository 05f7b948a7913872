//! A small metrics registry that renders real Prometheus text exposition (format 0.0.4).
//!
//! It owns counters, gauges and histograms keyed by label values, and their rendering: `# HELP` and
//! `# TYPE` once per family, histograms as cumulative `_bucket{le}` series plus `_sum` and `_count`,
//! label values escaped (`\\`, `\"`, `\n`). It does not know which metrics exist: every family is
//! declared by the module that records it (aggregator, admission, APF, storage), with the names,
//! label sets and buckets of the release the server speaks (kube-apiserver 1.30 by default,
//! REFERENCE §3; what differs by release is `profile.rs`), so that rules and a real Prometheus see
//! what they would see from a real cluster.
//!
//! Families are registered lazily on first use with their help text and type; a family name used
//! with two types is a programming error and panics in debug builds only through the assert.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// The type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic counter.
    Counter,
    /// Gauge.
    Gauge,
    /// Histogram with fixed buckets.
    Histogram,
}

#[derive(Debug, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug)]
struct Family {
    help: String,
    kind: Kind,
    label_names: Vec<String>,
    buckets: Vec<f64>,
    scalars: BTreeMap<Vec<String>, f64>,
    histograms: BTreeMap<Vec<String>, Histogram>,
}

/// The registry. Cheap to share behind an `Arc`; every operation takes one short lock.
#[derive(Debug, Default)]
pub struct Registry {
    families: Mutex<BTreeMap<String, Family>>,
}

/// Declaration of a family: name, help, label names.
#[derive(Debug, Clone, Copy)]
pub struct Desc {
    /// Metric name.
    pub name: &'static str,
    /// HELP text.
    pub help: &'static str,
    /// Label names, in the order values are given.
    pub labels: &'static [&'static str],
}

impl Registry {
    fn with_family<R>(
        &self,
        desc: &Desc,
        kind: Kind,
        buckets: &[f64],
        f: impl FnOnce(&mut Family) -> R,
    ) -> R {
        let mut families = self.families.lock().unwrap_or_else(|e| e.into_inner());
        let family = families
            .entry(desc.name.to_string())
            .or_insert_with(|| Family {
                help: desc.help.to_string(),
                kind,
                label_names: desc.labels.iter().map(|s| s.to_string()).collect(),
                buckets: buckets.to_vec(),
                scalars: BTreeMap::new(),
                histograms: BTreeMap::new(),
            });
        debug_assert_eq!(
            family.kind, kind,
            "metric {} used with two types",
            desc.name
        );
        f(family)
    }

    fn key(desc: &Desc, values: &[&str]) -> Vec<String> {
        debug_assert_eq!(desc.labels.len(), values.len(), "labels of {}", desc.name);
        values.iter().map(|s| s.to_string()).collect()
    }

    /// Add `by` to a counter.
    pub fn inc_by(&self, desc: &Desc, values: &[&str], by: f64) {
        let key = Self::key(desc, values);
        self.with_family(desc, Kind::Counter, &[], |f| {
            *f.scalars.entry(key).or_insert(0.0) += by;
        });
    }

    /// Add one to a counter.
    pub fn inc(&self, desc: &Desc, values: &[&str]) {
        self.inc_by(desc, values, 1.0);
    }

    /// Make a counter series exist (at 0) without incrementing it.
    pub fn touch_counter(&self, desc: &Desc, values: &[&str]) {
        self.inc_by(desc, values, 0.0);
    }

    /// Set a gauge.
    pub fn set(&self, desc: &Desc, values: &[&str], v: f64) {
        let key = Self::key(desc, values);
        self.with_family(desc, Kind::Gauge, &[], |f| {
            f.scalars.insert(key, v);
        });
    }

    /// Add to a gauge (negative to subtract).
    pub fn add(&self, desc: &Desc, values: &[&str], v: f64) {
        let key = Self::key(desc, values);
        self.with_family(desc, Kind::Gauge, &[], |f| {
            *f.scalars.entry(key).or_insert(0.0) += v;
        });
    }

    /// The current value of a counter or gauge series (tests and controllers read it back).
    pub fn value(&self, name: &str, values: &[&str]) -> Option<f64> {
        let families = self.families.lock().unwrap_or_else(|e| e.into_inner());
        let key: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        families.get(name)?.scalars.get(&key).copied()
    }

    /// Observe a value in a histogram.
    pub fn observe(&self, desc: &Desc, buckets: &[f64], values: &[&str], v: f64) {
        let key = Self::key(desc, values);
        self.with_family(desc, Kind::Histogram, buckets, |f| {
            let n = f.buckets.len();
            let h = f.histograms.entry(key).or_insert_with(|| Histogram {
                counts: vec![0; n],
                sum: 0.0,
                count: 0,
            });
            for (i, le) in f.buckets.iter().enumerate() {
                if v <= *le {
                    h.counts[i] += 1;
                }
            }
            h.sum += v;
            h.count += 1;
        });
    }

    /// Render every family as Prometheus text exposition.
    pub fn render(&self) -> String {
        let families = self.families.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (name, f) in families.iter() {
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (values, v) in &f.scalars {
                let labels = render_labels(&f.label_names, values, None);
                let _ = writeln!(out, "{name}{labels} {}", format_value(*v));
            }
            for (values, h) in &f.histograms {
                for (i, le) in f.buckets.iter().enumerate() {
                    let labels = render_labels(&f.label_names, values, Some(&format_value(*le)));
                    let _ = writeln!(out, "{name}_bucket{labels} {}", h.counts[i]);
                }
                let labels = render_labels(&f.label_names, values, Some("+Inf"));
                let _ = writeln!(out, "{name}_bucket{labels} {}", h.count);
                let labels = render_labels(&f.label_names, values, None);
                let _ = writeln!(out, "{name}_sum{labels} {}", format_value(h.sum));
                let _ = writeln!(out, "{name}_count{labels} {}", h.count);
            }
        }
        out
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn render_labels(names: &[String], values: &[String], le: Option<&str>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape_value(v)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` closely enough for exposition: integers without a
/// fraction, infinities as `+Inf`/`-Inf`.
pub fn format_value(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v.is_nan() {
        return "NaN".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: Desc = Desc {
        name: "x_total",
        help: "A \\ help\nline",
        labels: &["code", "path"],
    };
    const H: Desc = Desc {
        name: "x_seconds",
        help: "h",
        labels: &["op"],
    };

    #[test]
    fn renders_counters_with_escaped_labels_and_cumulative_histograms() {
        let r = Registry::default();
        r.inc(&REQ, &["200", "a\"b\\c\nd"]);
        r.inc(&REQ, &["200", "a\"b\\c\nd"]);
        r.observe(&H, &[0.1, 1.0], &["get"], 0.05);
        r.observe(&H, &[0.1, 1.0], &["get"], 0.5);
        r.observe(&H, &[0.1, 1.0], &["get"], 5.0);
        let text = r.render();
        assert!(text.contains("# HELP x_total A \\\\ help\\nline\n# TYPE x_total counter\n"));
        assert!(text.contains("x_total{code=\"200\",path=\"a\\\"b\\\\c\\nd\"} 2\n"));
        assert!(text.contains("x_seconds_bucket{op=\"get\",le=\"0.1\"} 1\n"));
        assert!(text.contains("x_seconds_bucket{op=\"get\",le=\"1\"} 2\n"));
        assert!(text.contains("x_seconds_bucket{op=\"get\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("x_seconds_sum{op=\"get\"} 5.55\n"));
        assert!(text.contains("x_seconds_count{op=\"get\"} 3\n"));
        assert_eq!(r.value("x_total", &["200", "a\"b\\c\nd"]), Some(2.0));
    }
}
