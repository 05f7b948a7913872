//! `-o junit`: JUnit XML for CI systems (GitLab, Jenkins, GitHub test reporters).
//!
//! One `<testsuite name="extpath">` with one `<testcase>` per subject: `classname` is the subject's
//! kind and `name` its name, so CI groups APIServices, webhooks and the API server apart.
//!
//! * `warning`/`critical` verdicts fail: `<failure message="summary" type="Class">` with the
//!   evidence, the ruled-out classes, the consequences and the next commands in the body.
//! * `Inconclusive` fails with `type="Inconclusive"`: a subject that cannot be judged is not a pass.
//! * `Healthy` passes; an `info` finding of another class passes with its summary in `<system-out>`.
//! * A waived verdict is `<skipped message="reason">`, with what it would have been in `<system-out>`.
//!
//! The headline, totals and gaps go to the suite's `<system-out>`; waiver notices (expired or
//! unmatched waivers, which someone must act on) to its `<system-err>`. Whether the CI job fails
//! is decided by the exit code of `--fail-on`, not by this file, which records every verdict.

use std::fmt::Write as _;
use std::io::Write;

use super::{
    confidence_text, display_order, evidence_text, gap_reason_text, headline, severity_counts,
    subject_text,
};
use crate::engine::diagnosis::{Class, Diagnosis, Severity, Verdict};
use crate::engine::waivers::worst_unwaived;

enum Outcome {
    Pass,
    Failure,
    Skipped,
}

fn outcome(v: &Verdict) -> Outcome {
    if v.waived.is_some() {
        Outcome::Skipped
    } else if v.class == Class::Inconclusive || v.severity >= Severity::Warning {
        Outcome::Failure
    } else {
        Outcome::Pass
    }
}

/// Render the JUnit format.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    let verdicts = display_order(d);
    let failures = verdicts
        .iter()
        .filter(|v| matches!(outcome(v), Outcome::Failure))
        .count();
    let skipped = verdicts
        .iter()
        .filter(|v| matches!(outcome(v), Outcome::Skipped))
        .count();

    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    let mut suite = format!(
        r#"<testsuite name="extpath" tests="{}" failures="{failures}" errors="0" skipped="{skipped}""#,
        verdicts.len()
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
    writeln!(out, "  <properties>")?;
    writeln!(
        out,
        r#"    <property name="apiVersion" value="{}"/>"#,
        attr(&d.api_version)
    )?;
    writeln!(
        out,
        r#"    <property name="worst" value="{}"/>"#,
        worst_unwaived(d)
    )?;
    writeln!(out, "  </properties>")?;

    for v in &verdicts {
        write_case(out, v)?;
    }

    writeln!(out, "  <system-out>{}</system-out>", body(&suite_out(d)))?;
    if !d.waiver_notices.is_empty() {
        let mut err = String::new();
        for n in &d.waiver_notices {
            let _ = writeln!(
                err,
                "waiver {} (rule {} on {}, expires {}): {}",
                n.problem, n.rule, n.subject, n.expires, n.reason
            );
        }
        writeln!(out, "  <system-err>{}</system-err>", body(&err))?;
    }
    writeln!(out, "</testsuite>")
}

fn write_case(out: &mut dyn Write, v: &Verdict) -> std::io::Result<()> {
    let open = format!(
        r#"  <testcase classname="{}" name="{}""#,
        attr(v.subject.kind.as_str()),
        attr(&v.subject.name)
    );
    match outcome(v) {
        Outcome::Pass if v.class == Class::Healthy => writeln!(out, "{open}/>"),
        Outcome::Pass => {
            writeln!(out, "{open}>")?;
            let text = format!("{} ({}): {}", v.class, v.severity, v.summary);
            writeln!(out, "    <system-out>{}</system-out>", body(&text))?;
            writeln!(out, "  </testcase>")
        }
        Outcome::Failure => {
            writeln!(out, "{open}>")?;
            writeln!(
                out,
                r#"    <failure message="{}" type="{}">{}</failure>"#,
                attr(&v.summary),
                attr(v.class.as_str()),
                body(&failure_body(v))
            )?;
            writeln!(out, "  </testcase>")
        }
        Outcome::Skipped => {
            let w = v.waived.as_ref().map(|w| w.reason.as_str()).unwrap_or("");
            writeln!(out, "{open}>")?;
            writeln!(out, r#"    <skipped message="{}"/>"#, attr(w))?;
            let until = v.waived.as_ref().map(|w| w.expires.as_str()).unwrap_or("");
            let text = format!(
                "waived until {until}; otherwise {} {}: {}",
                v.severity, v.class, v.summary
            );
            writeln!(out, "    <system-out>{}</system-out>", body(&text))?;
            writeln!(out, "  </testcase>")
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
fn body(s: &str) -> String {
    escape(s, false)
}

/// Escape an attribute value; line breaks and tabs become character references so that parsers
/// do not normalise them to spaces.
fn attr(s: &str) -> String {
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
