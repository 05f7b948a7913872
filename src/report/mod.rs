//! Verdicts → text: the human table, Markdown for incident docs, JUnit XML for CI, and JSON/YAML of
//! the [`Diagnosis`] contract.
//!
//! Every renderer writes into a `&mut dyn Write` and never prints, touches the clock or reads the
//! environment: what it writes depends only on the diagnosis and the [`RenderOptions`], which is what
//! makes the output snapshot-testable. The one place that looks at the terminal is
//! [`RenderOptions::for_stdout`] (with [`ColorChoice::resolve`] and [`terminal_width`]), which the
//! CLI calls once.
//!
//! Width follows kubectl's habits: on a terminal the table fits the terminal (`COLUMNS`, else the
//! terminal's size); piped or redirected output is never wrapped, so `grep` finds a phrase on one
//! line; `-o wide` is one line per verdict, nothing wrapped, like `kubectl get -o wide`.
//!
//! What this module does not own: deciding anything. Verdicts, summaries and waivers come from
//! `engine`; the renderers only order and present them. The one exception is the presentation order
//! ([`display_order`]): worst first, so that the line an on-call engineer needs is at the top.
//!
//! * [`table`] — the default terminal output (comfy-table).
//! * [`markdown`] — a document to paste into an incident.
//! * [`junit`] — one `<testcase>` per subject, for CI.
//! * [`json`], [`yaml`] — the Diagnosis as data.
//! * [`replay`] — `replay`'s pass/fail table and its `ReplayReport` document.
//! * [`why`] — `why`'s view of one request's path, and its `WhyReport` document.
//! * [`fleet`] — several clusters' diagnoses as one report (`scan --context a,b,c`).
//! * [`reference`](mod@reference) — the generated contract docs (`docs/*.schema.json`, `docs/bundle.md`).

pub mod fleet;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod reference;
pub mod replay;
pub mod table;
pub mod why;
pub(crate) mod wrap;
pub mod yaml;

use std::io::Write;

use crate::engine::diagnosis::{Diagnosis, Severity, Verdict};
use crate::engine::gate;

/// Output formats of a diagnosis (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A table with details for every finding: as wide as the terminal, not wrapped when piped.
    #[default]
    Table,
    /// The table with rung, confidence, evidence and consequences as columns, one line per
    /// verdict and nothing wrapped (like `kubectl get -o wide`).
    Wide,
    /// The Diagnosis as JSON (docs/diagnosis.schema.json).
    Json,
    /// The Diagnosis as YAML.
    Yaml,
    /// Markdown for incident documents.
    Markdown,
    /// JUnit XML for CI: one test case per subject, failing exactly as --fail-on does.
    Junit,
}

/// The width of a terminal whose size cannot be read, and the width the snapshots and the README
/// examples are rendered at.
pub const DEFAULT_WIDTH: u16 = 100;

/// The width that stands for "do not wrap" (piped output, `-o wide`): wider than any line.
const UNWRAPPED: usize = u16::MAX as usize;

/// How to render. Only the table reads `color`, `width` and `wide`, and only JUnit reads
/// `fail_on` and `elapsed`; the other formats are data or documents and look the same everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Use ANSI colours (severity, class, headings).
    pub color: bool,
    /// Maximum line width of the table; `None` means no wrapping at all (output that is not a
    /// terminal: a phrase must stay on one line for `grep`).
    pub width: Option<u16>,
    /// `-o wide`: rung, confidence, evidence and consequences as columns of the main table, one
    /// line per verdict, nothing wrapped.
    pub wide: bool,
    /// List every healthy subject as a row instead of one line that counts them.
    pub show_healthy: bool,
    /// The `--fail-on` threshold: JUnit reports a verdict not waived at or above it as a failure
    /// and one below it as a passing test case (the finding in its `<system-out>`).
    pub fail_on: Severity,
    /// How long the run took until rendering (collection and analysis), for JUnit's `time`;
    /// `None` writes `0` (snapshots).
    pub elapsed: Option<std::time::Duration>,
}

impl Default for RenderOptions {
    /// No colour, no wrapping, the default `--fail-on critical`.
    fn default() -> Self {
        RenderOptions {
            color: false,
            width: None,
            wide: false,
            fail_on: Severity::Critical,
            elapsed: None,
            show_healthy: false,
        }
    }
}

impl RenderOptions {
    /// Options for writing to this process's stdout: colour resolved from `choice` (see
    /// [`ColorChoice::resolve`]) and, when stdout is a terminal, its width ([`terminal_width`]);
    /// anything else is not wrapped.
    pub fn for_stdout(choice: ColorChoice, wide: bool) -> RenderOptions {
        use std::io::IsTerminal;
        // The only environment reads of the report module, done once here so that every renderer
        // stays a function of its arguments and the snapshots cannot depend on who ran them.
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR");
        let term = std::env::var_os("TERM");
        let columns = std::env::var_os("COLUMNS");
        RenderOptions {
            color: choice.resolve(tty, no_color.as_deref(), term.as_deref()),
            width: terminal_width(tty, columns.as_deref(), || {
                // comfy-table (crossterm) reads the terminal's size with TIOCGWINSZ.
                comfy_table::Table::new().width()
            }),
            wide,
            ..RenderOptions::default()
        }
    }

    /// The width to wrap at: the terminal's (at least 40 columns), or no limit.
    pub(crate) fn effective_width(&self) -> usize {
        match (self.wide, self.width) {
            (true, _) | (false, None) => UNWRAPPED,
            // A floor for narrow panes and odd `COLUMNS`: below it the detail label column would
            // leave no room for the text and every word would wrap onto a line of its own.
            (false, Some(w)) => usize::from(w.max(40)),
        }
    }
}

/// The table's width: `None` (no wrapping) when stdout is not a terminal; on a terminal, a
/// positive `COLUMNS` (what shells export and what people set to force a width), else the size the
/// terminal reports (`tty_size`, read only when needed), else [`DEFAULT_WIDTH`].
pub fn terminal_width(
    stdout_is_tty: bool,
    columns: Option<&std::ffi::OsStr>,
    tty_size: impl FnOnce() -> Option<u16>,
) -> Option<u16> {
    if !stdout_is_tty {
        return None;
    }
    let from_env = columns
        .and_then(|c| c.to_str())
        .and_then(|c| c.trim().parse::<u16>().ok())
        // `COLUMNS=0` or a non-number says nothing about the width: ask the terminal instead.
        .filter(|c| *c > 0);
    Some(from_env.or_else(tty_size).unwrap_or(DEFAULT_WIDTH))
}

/// `--color never|always|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`.
    #[default]
    Auto,
    /// Always colour (also when piped, e.g. into `less -R`).
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Decide whether to colour. `auto` follows <https://no-color.org>: a non-empty `NO_COLOR`
    /// turns colour off; so does `TERM=dumb` and any stdout that is not a terminal. An explicit
    /// `always`/`never` wins over the environment.
    pub fn resolve(
        self,
        stdout_is_tty: bool,
        no_color: Option<&std::ffi::OsStr>,
        term: Option<&std::ffi::OsStr>,
    ) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                stdout_is_tty
                    && no_color.is_none_or(|v| v.is_empty())
                    && term.is_none_or(|t| t != "dumb")
            }
        }
    }
}

/// Render a diagnosis in `format` into `out`.
///
/// # Errors
/// Only the writer's I/O errors (a closed pipe, a full disk); serialisation of the contract types
/// cannot fail.
pub fn render(
    d: &Diagnosis,
    format: Format,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        Format::Table => table::render(d, opts, out),
        Format::Wide => table::render(
            d,
            &RenderOptions {
                wide: true,
                ..*opts
            },
            out,
        ),
        Format::Json => json::render(d, out),
        Format::Yaml => yaml::render(d, out),
        Format::Markdown => markdown::render(d, out),
        Format::Junit => junit::render(d, opts, out),
    }
}

/// Verdicts in presentation order: worst first (by the gate's severity, so `Inconclusive` sits with
/// warnings and `Healthy` last), then verdicts that still count before waived ones, then by class
/// and subject so the order is stable whatever order the engine produced.
pub fn display_order(d: &Diagnosis) -> Vec<&Verdict> {
    let mut v: Vec<&Verdict> = d.verdicts.iter().collect();
    v.sort_by(|a, b| {
        // Ranked by the gate's severity, not the verdict's own: the order then agrees with the exit
        // code, and an Inconclusive verdict (which fails `--fail-on warning`) is not buried under
        // info findings. Waived verdicts sink within their rank: they are known and accepted.
        let rank = |v: &Verdict| gate::severity(v).map_or(0, |s| severity_rank(s) + 1);
        rank(b)
            .cmp(&rank(a))
            .then(a.waived.is_some().cmp(&b.waived.is_some()))
            .then(a.class.cmp(&b.class))
            .then(a.subject.cmp(&b.subject))
    });
    v
}

fn severity_rank(s: Severity) -> u8 {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Critical => 2,
    }
}

/// The diagnosis as people read it: problems first (each root verdict with the verdicts it
/// explains), then the verdicts that are no problem's (`Inconclusive`, info findings), then the
/// healthy ones — each part in presentation order.
pub struct Arranged<'d> {
    /// Each problem with its root verdict and its members' verdicts, waived problems last.
    pub problems: Vec<ArrangedProblem<'d>>,
    /// Findings that belong to no problem.
    pub others: Vec<&'d Verdict>,
    /// `Healthy` verdicts.
    pub healthy: Vec<&'d Verdict>,
}

/// One problem of [`Arranged`].
pub struct ArrangedProblem<'d> {
    /// The problem.
    pub problem: &'d crate::engine::problems::Problem,
    /// Its root verdict.
    pub root: &'d Verdict,
    /// The verdicts it explains.
    pub members: Vec<&'d Verdict>,
}

/// Arrange a diagnosis into problems, other findings and healthy subjects.
pub fn arrange(d: &Diagnosis) -> Arranged<'_> {
    let find = |s: &crate::engine::diagnosis::Subject| d.verdicts.iter().find(|v| &v.subject == s);
    let mut in_problem: Vec<&crate::engine::diagnosis::Subject> = Vec::new();
    let problems: Vec<ArrangedProblem<'_>> = d
        .problems
        .iter()
        .filter_map(|p| {
            let root = find(&p.root)?;
            in_problem.push(&p.root);
            let members = p
                .members
                .iter()
                // Marked as placed even when the member has no verdict, so it is never listed a
                // second time among the others.
                .filter_map(|m| {
                    in_problem.push(m);
                    find(m)
                })
                .collect();
            Some(ArrangedProblem {
                problem: p,
                root,
                members,
            })
        })
        .collect();
    let order = display_order(d);
    let others = order
        .iter()
        .copied()
        .filter(|v| is_finding(v) && !in_problem.contains(&&v.subject))
        .collect();
    let healthy = order
        .iter()
        .copied()
        .filter(|v| !is_finding(v) && !in_problem.contains(&&v.subject))
        .collect();
    Arranged {
        problems,
        others,
        healthy,
    }
}

/// `21 subjects healthy: APIService ×4, ValidatingWebhook ×2, …`.
pub fn healthy_line(healthy: &[&Verdict]) -> String {
    let mut kinds: Vec<(crate::engine::diagnosis::SubjectKind, usize)> = Vec::new();
    for v in healthy {
        match kinds.iter_mut().find(|(k, _)| *k == v.subject.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((v.subject.kind, 1)),
        }
    }
    kinds.sort_by_key(|(k, _)| *k);
    let parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    let noun = if healthy.len() == 1 {
        "subject"
    } else {
        "subjects"
    };
    format!("{} {noun} healthy: {}", healthy.len(), parts.join(", "))
}

/// Whether a verdict gets a detail block (table) or section (Markdown): everything but `Healthy`.
pub fn is_finding(v: &Verdict) -> bool {
    v.class != crate::engine::diagnosis::Class::Healthy
}

/// The totals line: problems by severity, unjudged subjects, healthy ones, waived verdicts, and the
/// subjects in all (`3 problems (2 critical, 1 warning); 1 unjudged; 4 healthy — 9 subjects`).
pub(crate) fn severity_counts(d: &Diagnosis) -> String {
    // Problems, not verdicts, are counted: the verdicts one root cause explains are its
    // consequences (DESIGN §1 rule 9), and ten broken APIServices behind one dead Service are one
    // thing to fix, not ten.
    let open: Vec<&crate::engine::problems::Problem> =
        crate::engine::problems::open(&d.problems).collect();
    let mut parts = Vec::new();
    if !open.is_empty() {
        let mut by_sev = Vec::new();
        for sev in [Severity::Critical, Severity::Warning, Severity::Info] {
            let n = open.iter().filter(|p| p.severity == sev).count();
            if n > 0 {
                by_sev.push(format!("{n} {sev}"));
            }
        }
        let noun = if open.len() == 1 {
            "problem"
        } else {
            "problems"
        };
        parts.push(format!("{} {noun} ({})", open.len(), by_sev.join(", ")));
    }
    let unjudged = d
        .verdicts
        .iter()
        .filter(|v| v.class == crate::engine::diagnosis::Class::Inconclusive && v.waived.is_none())
        .count();
    if unjudged > 0 {
        parts.push(format!("{unjudged} unjudged"));
    }
    let healthy = d
        .verdicts
        .iter()
        .filter(|v| v.class == crate::engine::diagnosis::Class::Healthy)
        .count();
    if healthy > 0 {
        parts.push(format!("{healthy} healthy"));
    }
    let waived = d.verdicts.iter().filter(|v| v.waived.is_some()).count();
    if waived > 0 {
        parts.push(format!("{waived} waived"));
    }
    let subjects = d.verdicts.len();
    let noun = if subjects == 1 { "subject" } else { "subjects" };
    if parts.is_empty() {
        format!("{subjects} {noun}")
    } else {
        format!("{} — {subjects} {noun}", parts.join("; "))
    }
}

/// The headline, or what to say when the engine left it empty.
pub(crate) fn headline(d: &Diagnosis) -> &str {
    let h = d.summary.headline.trim();
    if !h.is_empty() {
        h
    } else if d.verdicts.is_empty() {
        // Said explicitly rather than "no findings": nothing judged is not the same as healthy
        // (a bundle from the wrong context, or a collection that could list nothing).
        "no extension-path subjects were found in the evidence"
    } else {
        "no findings"
    }
}

/// An evidence value as people read it: strings bare, everything else as compact JSON. Trailing
/// whitespace of strings (a body's final newline, `service unavailable\n`) is dropped, inside lists
/// and maps too: it carries nothing and shows as `\n` or a blank line.
pub fn evidence_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.trim_end().to_string(),
        serde_json::Value::Null => "(none)".to_string(),
        other => trim_strings(other).to_string(),
    }
}

fn trim_strings(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(s.trim_end().to_string()),
        Value::Array(a) => Value::Array(a.iter().map(trim_strings).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), trim_strings(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `0.9` → `0.90`: confidence with two decimals, as people compare them.
pub(crate) fn confidence_text(c: f64) -> String {
    format!("{:.2}", c.clamp(0.0, 1.0))
}

/// The gap reason as words (`not_supplied` → `not supplied`).
pub(crate) fn gap_reason_text(r: crate::bundle::GapReason) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default()
}

/// A subject with its namespace and parent when it has them
/// (`ValidatingWebhook/vwh.example.com (in vwh-config)`).
pub(crate) fn subject_text(s: &crate::engine::diagnosis::Subject) -> String {
    let mut t = match &s.namespace {
        Some(ns) => format!("{}/{}/{}", s.kind, ns, s.name),
        None => format!("{}/{}", s.kind, s.name),
    };
    if let Some(p) = &s.parent {
        t.push_str(&format!(" (in {p})"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn evidence_drops_trailing_newlines_of_bodies() {
        use serde_json::json;
        assert_eq!(
            evidence_text(&json!("service unavailable\n")),
            "service unavailable"
        );
        assert_eq!(
            evidence_text(&json!(["a\n", {"b": "c \n"}])),
            r#"["a",{"b":"c"}]"#
        );
        assert_eq!(evidence_text(&json!(null)), "(none)");
    }

    #[test]
    fn auto_colour_needs_a_terminal_and_no_no_color() {
        let auto = ColorChoice::Auto;
        assert!(auto.resolve(true, None, None));
        assert!(auto.resolve(true, Some(OsStr::new("")), Some(OsStr::new("xterm"))));
        assert!(!auto.resolve(false, None, None));
        assert!(!auto.resolve(true, Some(OsStr::new("1")), None));
        assert!(!auto.resolve(true, None, Some(OsStr::new("dumb"))));
    }

    #[test]
    fn explicit_colour_choices_win_over_the_environment() {
        assert!(ColorChoice::Always.resolve(
            false,
            Some(OsStr::new("1")),
            Some(OsStr::new("dumb"))
        ));
        assert!(!ColorChoice::Never.resolve(true, None, None));
    }

    #[test]
    fn width_follows_the_terminal_and_piped_output_is_not_wrapped() {
        let never = || -> Option<u16> { panic!("the terminal is not asked when COLUMNS is set") };
        assert_eq!(
            terminal_width(false, Some(OsStr::new("80")), || Some(90)),
            None
        );
        assert_eq!(
            terminal_width(true, Some(OsStr::new("132")), never),
            Some(132)
        );
        assert_eq!(
            terminal_width(true, Some(OsStr::new(" 72 ")), never),
            Some(72)
        );
        assert_eq!(terminal_width(true, None, || Some(90)), Some(90));
        assert_eq!(
            terminal_width(true, Some(OsStr::new("0")), || Some(90)),
            Some(90)
        );
        assert_eq!(
            terminal_width(true, Some(OsStr::new("wide")), || None),
            Some(DEFAULT_WIDTH)
        );
        let piped = RenderOptions::default();
        assert_eq!(piped.effective_width(), UNWRAPPED);
        let narrow = RenderOptions {
            width: Some(20),
            ..piped
        };
        assert_eq!(narrow.effective_width(), 40);
        let wide = RenderOptions {
            width: Some(80),
            wide: true,
            ..piped
        };
        assert_eq!(wide.effective_width(), UNWRAPPED);
    }

    #[test]
    fn stdout_options_keep_explicit_choices() {
        let always = RenderOptions::for_stdout(ColorChoice::Always, true);
        assert!(always.color && always.wide);
        let never = RenderOptions::for_stdout(ColorChoice::Never, false);
        assert!(!never.color && !never.wide);
    }

    #[test]
    fn evidence_values_read_like_text() {
        assert_eq!(evidence_text(&serde_json::json!("x509: bad")), "x509: bad");
        assert_eq!(evidence_text(&serde_json::json!(503)), "503");
        assert_eq!(evidence_text(&serde_json::json!(0.25)), "0.25");
        assert_eq!(evidence_text(&serde_json::json!(null)), "(none)");
        assert_eq!(evidence_text(&serde_json::json!(["a", 1])), r#"["a",1]"#);
    }
}
