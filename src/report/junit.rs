//! `-o junit`: JUnit XML for CI systems (GitLab, Jenkins, GitHub test reporters).
//!
//! A `<testsuites>` root holding one `<testsuite name="extpath">` with one `<testcase>` per subject:
//! `classname` is the subject's kind and `name` its name — for a webhook with its configuration
//! (`vault.hashicorp.com (in vault-agent-injector-cfg)`), since two configurations may hold webhooks
//! of one name and CI tools merge test cases whose names are equal.
//!
//! The report tells the same story as the exit code of `--fail-on` ([`RenderOptions::fail_on`]):
//!
//! * a verdict not waived at or above the threshold fails: `<failure message="summary"
//!   type="Class">` with the evidence, the ruled-out classes, the consequences and the next
//!   commands in the body; `Inconclusive` counts as `warning` there, as it does for the gate;
//! * a verdict below the threshold passes, and its finding (the same text) is in the test case's
//!   `<system-out>`; `Healthy` passes with nothing to say;
//! * a waived verdict is `<skipped message="reason">`, with what it would have been in
//!   `<system-out>`.
//!
//! `time` attributes: the suite's (and the root's) is the run's time until rendering
//! ([`RenderOptions::elapsed`]: collection and analysis); a test case's is `0`, since subjects are
//! judged together in one pass and no per-subject time exists. The headline, totals and gaps go to
//! the suite's `<system-out>`; waiver notices (expired or unmatched waivers, which someone must act
//! on) to its `<system-err>`.

use std::fmt::Write as _;
use std::io::Write;

use super::{
    RenderOptions, confidence_text, display_order, evidence_text, gap_reason_text, headline,
    severity_counts, subject_text,
};
use crate::engine::diagnosis::{Class, Diagnosis, Severity, Verdict};
use crate::engine::gate;

/// What a verdict is for CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Healthy, or a finding below the `--fail-on` threshold.
    Pass,
    /// A finding not waived at or above the threshold: what makes the gate exit 1.
    Failure,
    /// A waived finding.
    Skipped,
}

/// The test case outcome of a verdict under the `fail_on` threshold: exactly the verdicts that make
/// `--fail-on` exit 1 fail (`engine::gate::fails`).
pub fn outcome(v: &Verdict, fail_on: Severity) -> Outcome {
    if v.waived.is_some() {
        Outcome::Skipped
    } else if gate::fails(v, fail_on) {
        Outcome::Failure
    } else {
        Outcome::Pass
    }
}

/// The test case name: the subject's name, with its configuration for a webhook.
pub fn case_name(v: &Verdict) -> String {
    match &v.subject.parent {
        Some(p) => format!("{} (in {p})", v.subject.name),
        None => v.subject.name.clone(),
    }
}

/// Render the JUnit format.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, opts: &RenderOptions, out: &mut dyn Write) -> std::io::Result<()> {
    let t = tally(d, opts);
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(out, r#"<testsuites name="extpath" {}>"#, t.attrs(opts))?;
    write_suite(out, d, opts, "extpath", &[])?;
    writeln!(out, "</testsuites>")
}

/// Test case counts of one diagnosis under `--fail-on`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    /// Test cases.
    pub tests: usize,
    /// Failing ones.
    pub failures: usize,
    /// Errors (a cluster that could not be collected, in a fleet report).
    pub errors: usize,
    /// Skipped (waived) ones.
    pub skipped: usize,
}

impl Tally {
    /// The counting attributes of a `<testsuite>` or `<testsuites>` element.
    pub(crate) fn attrs(&self, opts: &RenderOptions) -> String {
        let time = opts.elapsed.map_or(0.0, |e| e.as_secs_f64());
        format!(
            r#"tests="{}" failures="{}" errors="{}" skipped="{}" time="{time:.3}""#,
            self.tests, self.failures, self.errors, self.skipped
        )
    }

    /// The sum of two tallies.
    pub(crate) fn add(self, o: Tally) -> Tally {
        Tally {
            tests: self.tests + o.tests,
            failures: self.failures + o.failures,
            errors: self.errors + o.errors,
            skipped: self.skipped + o.skipped,
        }
    }
}

/// The counts of a diagnosis's test cases.
pub(crate) fn tally(d: &Diagnosis, opts: &RenderOptions) -> Tally {
    let count = |o: Outcome| {
        d.verdicts
            .iter()
            .filter(|v| outcome(v, opts.fail_on) == o)
            .count()
    };
    Tally {
        tests: d.verdicts.len(),
        failures: count(Outcome::Failure),
        errors: 0,
        skipped: count(Outcome::Skipped),
    }
}

/// One `<testsuite name="NAME">` for a diagnosis, with `properties` added to its own (a fleet
/// report names each cluster's context and server there).
pub(crate) fn write_suite(
    out: &mut dyn Write,
    d: &Diagnosis,
    opts: &RenderOptions,
    name: &str,
    properties: &[(&str, String)],
) -> std::io::Result<()> {
    let verdicts = display_order(d);
    let mut suite = format!(
        r#"  <testsuite name="{}" {}"#,
        attr(name),
        tally(d, opts).attrs(opts)
    );
    if let Some(t) = d.collected_at {
        // The JUnit schema's timestamp has no zone designator; the value is UTC.
        let _ = write!(
            suite,
            r#" timestamp="{}""#,
            attr(&t.strftime("%Y-%m-%dT%H:%M:%S").to_string())
        );
    }
    writeln!(out, "{suite}>")?;
    writeln!(out, "    <properties>")?;
    // The threshold and the worst severity travel with the report, so a CI page that shows only
    // the XML still says why the job failed (or why a warning did not fail it).
    let own = [
        ("apiVersion", d.api_version.clone()),
        ("fail-on", opts.fail_on.to_string()),
        ("worst", d.summary.worst.to_string()),
    ];
    for (name, value) in properties.iter().cloned().chain(own) {
        writeln!(
            out,
            r#"      <property name="{name}" value="{}"/>"#,
            attr(&value)
        )?;
    }
    writeln!(out, "    </properties>")?;

    for v in &verdicts {
        write_case(out, v, opts.fail_on)?;
    }

    writeln!(out, "    <system-out>{}</system-out>", body(&suite_out(d)))?;
    if !d.waiver_notices.is_empty() {
        let mut err = String::new();
        for n in &d.waiver_notices {
            let _ = writeln!(
                err,
                "waiver {} (rule {} on {}, expires {}): {}",
                n.problem, n.rule, n.subject, n.expires, n.reason
            );
        }
        writeln!(out, "    <system-err>{}</system-err>", body(&err))?;
    }
    writeln!(out, "  </testsuite>")
}

fn write_case(out: &mut dyn Write, v: &Verdict, fail_on: Severity) -> std::io::Result<()> {
    let open = format!(
        r#"    <testcase classname="{}" name="{}" time="0""#,
        attr(v.subject.kind.as_str()),
        attr(&case_name(v))
    );
    match outcome(v, fail_on) {
        // Every subject is a test case, healthy ones too: CI tools chart pass counts over time, and
        // an APIService that disappears from the report is then visible as a drop.
        Outcome::Pass if v.class == Class::Healthy => writeln!(out, "{open}/>"),
        Outcome::Pass => {
            writeln!(out, "{open}>")?;
            let text = format!("below --fail-on {fail_on}: {}", failure_body(v));
            writeln!(out, "      <system-out>{}</system-out>", body(&text))?;
            writeln!(out, "    </testcase>")
        }
        Outcome::Failure => {
            writeln!(out, "{open}>")?;
            writeln!(
                out,
                r#"      <failure message="{}" type="{}">{}</failure>"#,
                attr(&v.summary),
                attr(v.class.as_str()),
                body(&failure_body(v))
            )?;
            writeln!(out, "    </testcase>")
        }
        Outcome::Skipped => {
            let w = v.waived.as_ref().map(|w| w.reason.as_str()).unwrap_or("");
            writeln!(out, "{open}>")?;
            writeln!(out, r#"      <skipped message="{}"/>"#, attr(w))?;
            let until = v.waived.as_ref().map(|w| w.expires.as_str()).unwrap_or("");
            let text = format!("waived until {until}; otherwise {}", failure_body(v));
            writeln!(out, "      <system-out>{}</system-out>", body(&text))?;
            writeln!(out, "    </testcase>")
        }
    }
}

/// The failure text: what an engineer reading the CI log needs without opening anything else.
fn failure_body(v: &Verdict) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {} on {}",
        v.severity,
        v.class,
        subject_text(&v.subject)
    );
    let _ = writeln!(s, "{}", v.summary);
    match v.rung {
        Some(r) => {
            let _ = writeln!(
                s,
                "broke at: {r} (confidence {})",
                confidence_text(v.confidence)
            );
        }
        None => {
            let _ = writeln!(s, "confidence {}", confidence_text(v.confidence));
        }
    }
    if !v.related.is_empty() {
        let related: Vec<String> = v.related.iter().map(subject_text).collect();
        let _ = writeln!(s, "related: {}", related.join(", "));
    }
    if !v.rules.is_empty() {
        let _ = writeln!(s, "evidence:");
        for r in &v.rules {
            let _ = writeln!(s, "  {}", r.id);
            for (k, val) in &r.evidence {
                let _ = writeln!(s, "    {k} = {}", evidence_text(val));
            }
        }
    }
    if !v.ruled_out.is_empty() {
        let _ = writeln!(s, "ruled out:");
        for r in &v.ruled_out {
            let _ = writeln!(s, "  {}: {} ({})", r.class, r.because, r.rule);
        }
    }
    if !v.consequences.is_empty() {
        let _ = writeln!(s, "consequences:");
        for c in &v.consequences {
            let _ = writeln!(s, "  {} at {}: {} ({})", c.class, c.rung, c.summary, c.rule);
        }
    }
    if !v.next.is_empty() {
        let _ = writeln!(s, "next:");
        for n in &v.next {
            let _ = writeln!(s, "  {n}");
        }
    }
    s
}

fn suite_out(d: &Diagnosis) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", headline(d));
    let _ = writeln!(s, "{}", severity_counts(d));
    if !d.gaps.is_empty() {
        let _ = writeln!(s, "gaps (evidence the verdicts could not see):");
        for g in &d.gaps {
            let _ = write!(s, "  {} ({})", g.source, gap_reason_text(g.reason));
            if !g.detail.is_empty() {
                let _ = write!(s, ": {}", g.detail);
            }
            let _ = writeln!(s);
        }
    }
    s
}

/// Escape element text. Characters XML 1.0 forbids (most C0 controls) become U+FFFD: evidence can
/// carry anything a server sent, and one control byte would make the whole report unparseable.
pub(crate) fn body(s: &str) -> String {
    escape(s, false)
}

/// Escape an attribute value; line breaks and tabs become character references so that parsers
/// do not normalise them to spaces.
pub(crate) fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, in_attr: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' if in_attr => o.push_str("&quot;"),
            '\'' if in_attr => o.push_str("&apos;"),
            '\n' if in_attr => o.push_str("&#10;"),
            '\r' if in_attr => o.push_str("&#13;"),
            '\t' if in_attr => o.push_str("&#9;"),
            '\n' | '\r' | '\t' => o.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_escape_markup_quotes_and_line_breaks() {
        assert_eq!(
            attr(r#"a<b>&"c" 'd'"#),
            "a&lt;b&gt;&amp;&quot;c&quot; &apos;d&apos;"
        );
        assert_eq!(attr("one\ntwo\tthree"), "one&#10;two&#9;three");
    }

    #[test]
    fn text_keeps_line_breaks_and_drops_forbidden_controls() {
        assert_eq!(body("x < y\nz & w"), "x &lt; y\nz &amp; w");
        assert_eq!(body("bell\u{7}nul\u{0}"), "bell\u{FFFD}nul\u{FFFD}");
        assert_eq!(body(r#"quote " stays"#), r#"quote " stays"#);
    }
}
