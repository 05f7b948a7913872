//! The default output: what an on-call engineer reads in a terminal during an incident.
//!
//! Layout, top to bottom: the problems, worst first — each root verdict's row (severity, class,
//! subject, the one-line summary) with the verdicts it explains under it (`↳`) — then the findings
//! of no problem (`Inconclusive`), then one line counting the healthy subjects (every one with
//! `--show-healthy`); then a block for each problem and each other finding — the rung where the
//! path broke, the evidence that fired, what was ruled out and why, what it explains, the
//! consequences, the commands to run next; then the gaps (what could not be seen), waiver notices,
//! and the headline.
//!
//! The table is comfy-table with its terminal detection switched off, so width and colour come
//! only from [`RenderOptions`]; the blocks are plain text wrapped here by hand, because commands
//! must never be wrapped (they are copied into a shell) while prose should be. ANSI colour is
//! applied only when `opts.color` is set.

use std::io::Write;

use comfy_table::{
    Attribute, Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, LineStyle, Table,
    TableStyle,
};

use super::wrap::{wrap_words, write_wrapped};
use super::{
    RenderOptions, arrange, confidence_text, evidence_text, gap_reason_text, headline,
    healthy_line, severity_counts, subject_text,
};
use crate::engine::diagnosis::{Class, Diagnosis, Severity, Verdict};

/// Column headings separated from the rows by one rule; no vertical lines, so the table pastes
/// cleanly into chat and tickets.
const TABLE_STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// Width of the labels in a verdict's block (`Consequences` is the longest).
const LABEL_WIDTH: usize = 14;
/// Indent of a verdict block's lines under its heading.
const INDENT: usize = 2;

/// Render the table format.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, opts: &RenderOptions, out: &mut dyn Write) -> std::io::Result<()> {
    let paint = Paint { on: opts.color };
    let width = opts.effective_width();
    let arranged = arrange(d);

    let mut rows: Vec<Row<'_>> = Vec::new();
    for p in &arranged.problems {
        rows.push(Row::Verdict(p.root, false));
        rows.extend(p.members.iter().map(|m| Row::Verdict(m, true)));
    }
    rows.extend(arranged.others.iter().map(|v| Row::Verdict(v, false)));
    // `-o wide` lists every verdict, one per line, for grep.
    // A single healthy subject gets its row: the counting line would be no shorter and would
    // hide its name.
    if opts.show_healthy || opts.wide || arranged.healthy.len() == 1 {
        rows.extend(arranged.healthy.iter().map(|v| Row::Verdict(v, false)));
    } else if !arranged.healthy.is_empty() {
        rows.push(Row::Healthy(format!(
            "{} (--show-healthy lists them)",
            healthy_line(&arranged.healthy)
        )));
    }
    if rows.is_empty() {
        writeln!(
            out,
            "No extension-path subjects were found in the evidence."
        )?;
    } else {
        let table = verdict_table(&rows, opts, width);
        writeln!(out, "{table}")?;
    }

    // A block per problem (its root, with what it explains), then per finding of no problem.
    for p in &arranged.problems {
        writeln!(out)?;
        write_block(out, p.root, &p.members, opts, width, &paint)?;
    }
    for v in &arranged.others {
        writeln!(out)?;
        write_block(out, v, &[], opts, width, &paint)?;
    }

    // Gaps come right after the findings because they qualify them: a clean table over a
    // collection that was refused `/metrics` says less than it seems to.
    if !d.gaps.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            paint.heading("Gaps: evidence the verdicts could not see")
        )?;
        for g in &d.gaps {
            let mut line = format!("{} ({})", g.source, gap_reason_text(g.reason));
            if !g.detail.is_empty() {
                line.push_str(": ");
                line.push_str(&g.detail);
            }
            write_wrapped(out, &line, "  - ", "    ", width)?;
        }
    }

    if !d.waiver_notices.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", paint.heading("Waivers needing attention"))?;
        for n in &d.waiver_notices {
            let what = match n.problem.as_str() {
                "expired" => format!("expired on {}; it no longer applies", n.expires),
                "unmatched" => "matched nothing; remove it if the finding is gone".to_string(),
                other => other.to_string(),
            };
            let line = format!(
                "rule {} on {}: {what} (reason: {})",
                n.rule, n.subject, n.reason
            );
            write_wrapped(out, &line, "  - ", "    ", width)?;
        }
    }

    writeln!(out)?;
    let worst = d.summary.worst;
    let footer = [
        ("Headline:", headline(d).to_string()),
        (
            "Totals:",
            format!(
                "{}; worst not waived: {}",
                severity_counts(d),
                paint.severity(worst, false)
            ),
        ),
    ];
    for (label, text) in footer {
        write_wrapped(out, &text, &format!("{label:<10}"), &" ".repeat(10), width)?;
    }
    // Expiry and other time checks are judged at collection time (DESIGN §2), so reading an old
    // bundle today must say which moment its verdicts describe.
    if let Some(t) = d.collected_at {
        let text = format!("collected at {t}; time checks are judged at that moment");
        write_wrapped(out, &text, "Evidence: ", &" ".repeat(10), width)?;
    }
    Ok(())
}

/// The narrowest the summary column may get before the summary moves under the subject instead.
const MIN_SUMMARY_WIDTH: usize = 36;

/// One row of the main table: a verdict (indented when a problem's root explains it), or the line
/// that counts the healthy subjects.
enum Row<'d> {
    Verdict(&'d Verdict, bool),
    Healthy(String),
}

fn verdict_table(rows: &[Row<'_>], opts: &RenderOptions, width: usize) -> String {
    let mut table = Table::new();
    table.force_no_tty().load_style(TABLE_STYLE);
    if opts.color {
        // Colour the words, not the cell padding around them.
        table.enforce_styling().style_text_only();
    }

    // Subject names are never wrapped: a name split in two cannot be searched for or copied.
    // When the longest subject leaves too little room for a summary column, each summary goes
    // under its subject in the same cell instead (what a 100-column terminal usually gets for
    // webhooks, whose names are long). The wide table, like `kubectl get -o wide`, wraps nothing
    // and is as wide as its content: it is meant for wide terminals and `less -S`.
    let subjects: Vec<String> = rows
        .iter()
        .map(|r| match r {
            Row::Verdict(v, false) => subject_text(&v.subject),
            Row::Verdict(v, true) => format!("↳ {}", subject_text(&v.subject)),
            Row::Healthy(_) => String::new(),
        })
        .collect();
    let col = |w: usize| w + 2;
    let subject_w = subjects
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    let class_w = rows
        .iter()
        .filter_map(|r| match r {
            Row::Verdict(v, _) => Some(v.class.as_str().len()),
            Row::Healthy(_) => None,
        })
        // `Healthy`, the widest class the counting row may add; 8 below is `critical`.
        .chain([7])
        .max()
        .unwrap_or(7);
    let needed = col(8) + col(class_w) + col(subject_w) + col(MIN_SUMMARY_WIDTH);
    let separate_summary = opts.wide || needed <= width;
    if opts.wide {
        table.set_content_arrangement(ContentArrangement::Disabled);
    } else {
        table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(u16::try_from(width).unwrap_or(u16::MAX));
    }

    let mut header = vec!["SEVERITY", "CLASS"];
    header.push(if separate_summary {
        "SUBJECT"
    } else {
        "SUBJECT / SUMMARY"
    });
    if opts.wide {
        header.extend(["RUNG", "CONF"]);
    }
    if separate_summary {
        header.push("SUMMARY");
    }
    if opts.wide {
        header.extend(["EVIDENCE", "CONSEQUENCES"]);
    }
    table.set_header(header);

    // `-o wide` is one line per verdict (grep, `less -S`, `sort`): what stacks in a cell of the
    // normal table is joined on one line.
    let stack = if opts.wide { "; " } else { "\n" };
    for (r, subject) in rows.iter().zip(subjects) {
        let (v, member) = match r {
            Row::Verdict(v, member) => (*v, *member),
            Row::Healthy(line) => {
                let mut row = vec![
                    styled_cell(Cell::new("info"), Some((Color::Green, false)), opts.color),
                    styled_cell(
                        Cell::new("Healthy"),
                        class_color(Class::Healthy),
                        opts.color,
                    ),
                ];
                if separate_summary {
                    row.push(Cell::new(""));
                }
                row.extend(
                    opts.wide
                        .then(|| [Cell::new(""), Cell::new("")])
                        .into_iter()
                        .flatten(),
                );
                row.push(Cell::new(line));
                table.add_row(row);
                continue;
            }
        };
        // A verdict a problem explains shows under it, without repeating severity and class.
        let mut sev = if member {
            String::new()
        } else {
            v.severity.to_string()
        };
        if v.waived.is_some() && !member {
            sev.push_str(if opts.wide { " (waived)" } else { "\n(waived)" });
        }
        let mut row = vec![
            styled_cell(Cell::new(sev), severity_color(v), opts.color),
            styled_cell(
                Cell::new(if member { "" } else { v.class.as_str() }),
                class_color(v.class),
                opts.color,
            ),
        ];
        if separate_summary {
            row.push(Cell::new(subject));
        } else {
            row.push(Cell::new(format!("{subject}\n{}", v.summary)));
        }
        if opts.wide {
            row.push(Cell::new(v.rung.map(|r| r.to_string()).unwrap_or_default()));
            row.push(Cell::new(confidence_text(v.confidence)).set_alignment(CellAlignment::Right));
        }
        if separate_summary {
            row.push(Cell::new(if opts.wide {
                one_line(&v.summary)
            } else {
                v.summary.clone()
            }));
        }
        if opts.wide {
            row.push(Cell::new(one_line(&wide_evidence(v).join(stack))));
            let cons: Vec<String> = v
                .consequences
                .iter()
                .map(|c| format!("{} ({}, {})", c.rule, c.class, c.rung))
                .collect();
            row.push(Cell::new(cons.join(stack)));
        }
        table.add_row(row);
    }
    let fixed = if separate_summary { 3 } else { 2 };
    for i in 0..fixed {
        if let Some(col) = table.column_mut(i) {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    table.trim_fmt()
}

fn styled_cell(cell: Cell, color: Option<(Color, bool)>, on: bool) -> Cell {
    match (on, color) {
        (true, Some((c, bold))) => {
            let cell = cell.fg(c);
            if bold {
                cell.add_attribute(Attribute::Bold)
            } else {
                cell
            }
        }
        _ => cell,
    }
}

fn severity_color(v: &Verdict) -> Option<(Color, bool)> {
    match (v.severity, v.class) {
        (Severity::Critical, _) => Some((Color::Red, true)),
        (Severity::Warning, _) => Some((Color::Yellow, true)),
        (Severity::Info, Class::Healthy) => Some((Color::Green, false)),
        (Severity::Info, _) => Some((Color::Blue, false)),
    }
}

fn class_color(c: Class) -> Option<(Color, bool)> {
    match c {
        Class::Healthy => Some((Color::Green, false)),
        Class::Inconclusive => Some((Color::Magenta, false)),
        Class::OutOfScope => Some((Color::DarkGrey, false)),
        _ => Some((Color::Cyan, true)),
    }
}

/// `rule-id (name = value, …)` per deciding rule, for the wide table's one-line cell.
fn wide_evidence(v: &Verdict) -> Vec<String> {
    v.rules
        .iter()
        .map(|r| {
            let values: Vec<String> = r
                .evidence
                .iter()
                .map(|(k, val)| format!("{k} = {}", evidence_text(val)))
                .collect();
            if values.is_empty() {
                r.id.clone()
            } else {
                format!("{} ({})", r.id, values.join(", "))
            }
        })
        .collect()
}

/// Line breaks inside a value (a response body) become spaces: a wide row is one line.
fn one_line(s: &str) -> String {
    s.split(['\n', '\r'])
        .filter(|p| !p.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn write_block(
    out: &mut dyn Write,
    v: &Verdict,
    explains: &[&Verdict],
    opts: &RenderOptions,
    width: usize,
    paint: &Paint,
) -> std::io::Result<()> {
    let healthy = v.class == Class::Healthy;
    let mut tag = paint.severity(v.severity, healthy);
    if v.waived.is_some() {
        tag.push_str(", waived");
    }
    writeln!(
        out,
        "[{tag}] {}: {}",
        paint.class(v.class),
        paint.bold(&subject_text(&v.subject))
    )?;
    let mut block = Block { out, width };
    let rung = match v.rung {
        Some(r) => format!("{r} (confidence {})", confidence_text(v.confidence)),
        None => format!("none (confidence {})", confidence_text(v.confidence)),
    };
    // An Inconclusive verdict did not break anywhere: its rung is only where judging stopped for
    // want of evidence, and "Broke at" would assert a failure nobody saw.
    let rung_label = if v.class == Class::Inconclusive {
        "Rung"
    } else {
        "Broke at"
    };
    block.field(rung_label, vec![Line::prose(rung)], true)?;
    if !v.related.is_empty() {
        let related: Vec<String> = v.related.iter().map(subject_text).collect();
        block.field("Related", vec![Line::prose(related.join(", "))], true)?;
    }
    if !opts.wide && !v.rules.is_empty() {
        block.field("Evidence", evidence_block(v), true)?;
    }
    if !v.ruled_out.is_empty() {
        let name_w = v
            .ruled_out
            .iter()
            .map(|r| r.class.as_str().len())
            .max()
            .unwrap_or(0);
        let lines = v
            .ruled_out
            .iter()
            .map(|r| Line {
                head: format!("{:<name_w$}  ", r.class.as_str()),
                body: format!("{} ({})", r.because, r.rule),
            })
            .collect();
        block.field("Ruled out", lines, true)?;
    }
    if !opts.wide && !v.consequences.is_empty() {
        let lines = v
            .consequences
            .iter()
            .map(|c| Line {
                head: if c.class == v.class {
                    format!("{}: ", c.rung)
                } else {
                    format!("{} ({}): ", c.rung, c.class)
                },
                body: format!("{} ({})", c.summary, c.rule),
            })
            .collect();
        block.field("Consequences", lines, true)?;
    }
    if !explains.is_empty() {
        let lines = explains
            .iter()
            .map(|m| Line::prose(format!("{} — {}", subject_text(&m.subject), m.summary)))
            .collect();
        block.field("Explains", lines, true)?;
    }
    // What to run for the verdicts it explains too, once each.
    let mut next: Vec<&String> = Vec::new();
    for c in v
        .next
        .iter()
        .chain(explains.iter().flat_map(|m| m.next.iter()))
    {
        if !next.contains(&c) {
            next.push(c);
        }
    }
    if !next.is_empty() {
        let lines = next.iter().map(|c| Line::prose((*c).clone())).collect();
        // Commands are copied into a shell: never wrapped.
        block.field("Next", lines, false)?;
    }
    if let Some(w) = &v.waived {
        let line = Line::prose(format!("until {}: {}", w.expires, w.reason));
        block.field("Waived", vec![line], true)?;
    }
    Ok(())
}

/// For each deciding rule: its id (with its own summary when it differs from the verdict's), then
/// its evidence values with the names aligned.
fn evidence_block(v: &Verdict) -> Vec<Line> {
    let mut lines = Vec::new();
    for r in &v.rules {
        if r.summary != v.summary && !r.summary.is_empty() {
            lines.push(Line {
                head: format!("{}: ", r.id),
                body: r.summary.clone(),
            });
        } else {
            lines.push(Line::prose(r.id.clone()));
        }
        let key_w = r
            .evidence
            .keys()
            .map(|k| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, val) in &r.evidence {
            lines.push(Line {
                head: format!("  {k:<key_w$} = "),
                body: evidence_text(val),
            });
        }
    }
    lines
}

/// One line of a block field: `head` is printed as is, `body` wraps and its continuation lines
/// are indented to the end of `head`, so values and reasons stay in their column.
struct Line {
    head: String,
    body: String,
}

impl Line {
    fn prose(body: String) -> Line {
        Line {
            head: String::new(),
            body,
        }
    }
}

struct Block<'a> {
    out: &'a mut dyn Write,
    width: usize,
}

impl Block<'_> {
    fn field(&mut self, label: &str, lines: Vec<Line>, wrap: bool) -> std::io::Result<()> {
        let label_col = " ".repeat(INDENT + LABEL_WIDTH);
        for (i, line) in lines.into_iter().enumerate() {
            let lead = if i == 0 {
                format!("{}{label:<LABEL_WIDTH$}", " ".repeat(INDENT))
            } else {
                label_col.clone()
            };
            let head_w = INDENT + LABEL_WIDTH + line.head.chars().count();
            let body_lines = if wrap {
                wrap_words(&line.body, self.width.saturating_sub(head_w).max(20))
            } else {
                vec![line.body]
            };
            for (j, body) in body_lines.iter().enumerate() {
                if j == 0 {
                    writeln!(self.out, "{lead}{}{body}", line.head)?;
                } else {
                    writeln!(self.out, "{}{body}", " ".repeat(head_w))?;
                }
            }
        }
        Ok(())
    }
}

/// ANSI styling, or none.
struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, s: &str, codes: &str) -> String {
        if self.on {
            format!("\x1b[{codes}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn heading(&self, s: &str) -> String {
        self.wrap(s, "1")
    }
    fn bold(&self, s: &str) -> String {
        self.wrap(s, "1")
    }
    fn severity(&self, s: Severity, healthy: bool) -> String {
        match s {
            Severity::Critical => self.wrap(s.as_str(), "1;31"),
            Severity::Warning => self.wrap(s.as_str(), "1;33"),
            Severity::Info if healthy => self.wrap(s.as_str(), "32"),
            Severity::Info => self.wrap(s.as_str(), "34"),
        }
    }
    fn class(&self, c: Class) -> String {
        match c {
            Class::Healthy => self.wrap(c.as_str(), "32"),
            Class::Inconclusive => self.wrap(c.as_str(), "35"),
            Class::OutOfScope => self.wrap(c.as_str(), "90"),
            _ => self.wrap(c.as_str(), "1;36"),
        }
    }
}
