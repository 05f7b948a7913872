//! `-o markdown`: a document an SRE pastes into an incident doc or a ticket.
//!
//! Layout: a title, the headline and totals, an overview table of the problems (each root with the
//! verdicts it explains under it), the findings of no problem and one line counting the healthy
//! subjects, then a section per problem and per other finding — the facts (rung, confidence,
//! related objects, a waiver), the evidence as a table, what was ruled out, what it explains, the
//! consequences and the next commands as a fenced shell block — then the gaps and waiver notices.
//!
//! Everything that comes from evidence is escaped: names and messages can contain `|`, `*`, `<` or
//! backticks, and a stray one must not break a table or start HTML. Evidence values and commands go
//! into code spans or fences whose backtick run is longer than any run inside them. GitHub-flavoured
//! Markdown is the target (tables, fenced code).

use std::io::Write;

use super::{
    arrange, confidence_text, display_order, evidence_text, gap_reason_text, headline,
    healthy_line, severity_counts, subject_text,
};
use crate::engine::diagnosis::{Diagnosis, Verdict};

/// Render the Markdown format.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    let verdicts = display_order(d);
    writeln!(out, "# extpath diagnosis")?;
    writeln!(out)?;
    writeln!(out, "**{}**", text(headline(d)))?;
    writeln!(out)?;
    let mut facts = format!(
        "{}; worst not waived: **{}**",
        text(&severity_counts(d)),
        d.summary.worst
    );
    if let Some(t) = d.collected_at {
        facts.push_str(&format!("; evidence collected at {}", code(&t.to_string())));
    }
    writeln!(out, "{facts}.")?;

    // The overview: each problem's root, the verdicts it explains under it, then the findings of
    // no problem; healthy subjects counted in one line.
    let arranged = arrange(d);
    if !verdicts.is_empty() {
        writeln!(out)?;
        writeln!(out, "| Severity | Class | Subject | Summary |")?;
        writeln!(out, "|---|---|---|---|")?;
        let row = |out: &mut dyn Write, v: &Verdict, member: bool| -> std::io::Result<()> {
            let mut sev = if member {
                String::new()
            } else {
                format!("**{}**", v.severity)
            };
            if v.waived.is_some() && !member {
                sev.push_str(" (waived)");
            }
            let subject = code(&subject_text(&v.subject));
            writeln!(
                out,
                "| {sev} | {} | {} | {} |",
                if member {
                    String::new()
                } else {
                    v.class.to_string()
                },
                if member {
                    format!("↳ {subject}")
                } else {
                    subject
                },
                cell(&text(&v.summary))
            )
        };
        for p in &arranged.problems {
            row(out, p.root, false)?;
            for m in &p.members {
                row(out, m, true)?;
            }
        }
        for v in &arranged.others {
            row(out, v, false)?;
        }
        if !arranged.healthy.is_empty() {
            writeln!(
                out,
                "| info | Healthy | | {} |",
                cell(&text(&healthy_line(&arranged.healthy)))
            )?;
        }
    }

    for p in &arranged.problems {
        writeln!(out)?;
        write_section(out, p.root, &p.members)?;
    }
    for v in &arranged.others {
        writeln!(out)?;
        write_section(out, v, &[])?;
    }

    if !d.gaps.is_empty() {
        writeln!(out)?;
        writeln!(out, "## Gaps")?;
        writeln!(out)?;
        writeln!(out, "What the verdicts could not see:")?;
        writeln!(out)?;
        writeln!(out, "| Source | Reason | Detail |")?;
        writeln!(out, "|---|---|---|")?;
        for g in &d.gaps {
            writeln!(
                out,
                "| {} | {} | {} |",
                code(&g.source),
                gap_reason_text(g.reason),
                cell(&text(&g.detail))
            )?;
        }
    }

    if !d.waiver_notices.is_empty() {
        writeln!(out)?;
        writeln!(out, "## Waivers needing attention")?;
        writeln!(out)?;
        for n in &d.waiver_notices {
            let what = match n.problem.as_str() {
                "expired" => format!("expired on {}; it no longer applies", n.expires),
                "unmatched" => "matched nothing; remove it if the finding is gone".to_string(),
                other => text(other),
            };
            writeln!(
                out,
                "- rule {} on {}: {what}. Reason: {}",
                code(&n.rule),
                code(&n.subject),
                text(&n.reason)
            )?;
        }
    }
    Ok(())
}

fn write_section(out: &mut dyn Write, v: &Verdict, explains: &[&Verdict]) -> std::io::Result<()> {
    // Severity first in the heading: an incident doc's outline (GitHub and most wikis list the
    // headings) then reads as a triage list.
    writeln!(
        out,
        "## {} · {} · {}",
        v.severity,
        v.class,
        code(&subject_text(&v.subject))
    )?;
    writeln!(out)?;
    writeln!(out, "{}", text(&v.summary))?;
    writeln!(out)?;
    match v.rung {
        Some(r) => writeln!(
            out,
            "- **Broke at:** {} (confidence {})",
            code(r.as_str()),
            confidence_text(v.confidence)
        )?,
        None => writeln!(
            out,
            "- **Rung:** none (confidence {})",
            confidence_text(v.confidence)
        )?,
    }
    if !v.related.is_empty() {
        let related: Vec<String> = v.related.iter().map(|s| code(&subject_text(s))).collect();
        writeln!(out, "- **Related:** {}", related.join(", "))?;
    }
    if let Some(w) = &v.waived {
        writeln!(
            out,
            "- **Waived** until {}: {}",
            code(&w.expires),
            text(&w.reason)
        )?;
    }

    if !v.rules.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Evidence")?;
        writeln!(out)?;
        writeln!(out, "| Rule | Evidence | Value |")?;
        writeln!(out, "|---|---|---|")?;
        for r in &v.rules {
            // A rule that fired on its condition alone still gets a row: the reader must see
            // which rule decided, even with nothing to quote.
            if r.evidence.is_empty() {
                writeln!(out, "| {} | | |", code(&r.id))?;
            }
            for (i, (k, val)) in r.evidence.iter().enumerate() {
                let rule = if i == 0 { code(&r.id) } else { String::new() };
                writeln!(
                    out,
                    "| {rule} | {} | {} |",
                    code(k),
                    code(&evidence_text(val))
                )?;
            }
        }
    }

    if !v.ruled_out.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Ruled out")?;
        writeln!(out)?;
        for r in &v.ruled_out {
            writeln!(
                out,
                "- **{}**: {} ({})",
                r.class,
                text(&r.because),
                code(&r.rule)
            )?;
        }
    }

    if !explains.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Explains")?;
        writeln!(out)?;
        for m in explains {
            writeln!(
                out,
                "- {}: {}",
                code(&subject_text(&m.subject)),
                text(&m.summary)
            )?;
        }
    }

    if !v.consequences.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Consequences")?;
        writeln!(out)?;
        for c in &v.consequences {
            writeln!(
                out,
                "- **{}** at {}: {} ({})",
                c.class,
                code(c.rung.as_str()),
                text(&c.summary),
                code(&c.rule)
            )?;
        }
    }

    // What to run for the verdicts it explains too, once each.
    let mut next: Vec<String> = Vec::new();
    for c in v
        .next
        .iter()
        .chain(explains.iter().flat_map(|m| m.next.iter()))
    {
        if !next.contains(c) {
            next.push(c.clone());
        }
    }
    if !next.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Next steps")?;
        writeln!(out)?;
        let fence = "`".repeat(longest_backtick_run(&next.join("\n")).max(2) + 1);
        writeln!(out, "{fence}sh")?;
        for cmd in &next {
            writeln!(out, "{cmd}")?;
        }
        writeln!(out, "{fence}")?;
    }
    Ok(())
}

/// Escape prose so that no character from evidence becomes Markdown syntax or HTML.
///
/// An underscore inside a word (`etcd_request_duration_seconds`) cannot start emphasis in GFM, so
/// it is left alone to keep metric names readable in the raw text.
fn text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut o = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        let intraword = |i: usize| {
            i > 0
                && chars[i - 1].is_alphanumeric()
                && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric())
        };
        match c {
            '_' if intraword(i) => o.push(c),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' => {
                o.push('\\');
                o.push(c);
            }
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\n' | '\r' => o.push(' '),
            _ => o.push(c),
        }
    }
    o
}

/// A code span that survives any content: a fence longer than the longest backtick run inside,
/// padded when the content starts or ends with a backtick; `|` escaped for tables (GFM reads `\|`
/// inside a code span in a table cell as a literal pipe).
fn code(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let fence = "`".repeat(longest_backtick_run(&s) + 1);
    // CommonMark strips one space from each end of a code span that has one on both ends, so the
    // padding is invisible in the rendered text and only keeps a content backtick from merging
    // into the fence.
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", s.replace('|', "\\|"))
}

/// Table cells cannot hold line breaks.
fn cell(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn longest_backtick_run(s: &str) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_from_evidence_cannot_become_markup() {
        assert_eq!(
            text("a|b *c* <script> [x](y) _z_"),
            r"a\|b \*c\* &lt;script&gt; \[x\](y) \_z\_"
        );
        assert_eq!(text("two\nlines"), "two lines");
        assert_eq!(
            text("etcd_request_duration_seconds _x_"),
            r"etcd_request_duration_seconds \_x\_"
        );
    }

    #[test]
    fn code_spans_outgrow_their_backticks() {
        assert_eq!(code("plain"), "`plain`");
        assert_eq!(code("has ` tick"), "``has ` tick``");
        assert_eq!(code("`edge"), "`` `edge ``");
        assert_eq!(code("a|b"), r"`a\|b`");
    }
}
