//! The human output of `replay`: one block of table rows per scenario — pass or FAIL, each
//! expected subject with the class expected and the verdict got; on failure the verdict's summary
//! too — and a last line with the totals. `--verbose` lists every verdict of every scenario under
//! the table. The JSON document is serialised in `run.rs`; this file only draws.

use std::io::Write;

use comfy_table::{Attribute, Cell, Color, ContentArrangement, LineStyle, Table, TableStyle};

use super::run::{ReplayReport, ScenarioOutcome};

/// The same look as the verdict table: a rule under the header, no vertical lines.
const TABLE_STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// Width the table wraps summaries to.
const WIDTH: u16 = 120;

fn cell(text: impl Into<String>, color: Option<Color>, on: bool) -> Cell {
    let c = Cell::new(text.into());
    match color {
        Some(col) if on => c.fg(col).add_attribute(Attribute::Bold),
        _ => c,
    }
}

fn rows(o: &ScenarioOutcome, color: bool, table: &mut Table) {
    let (word, col) = if o.passed {
        ("pass", Color::Green)
    } else {
        ("FAIL", Color::Red)
    };
    let mut first = vec![
        cell(word, Some(col), color),
        Cell::new(&o.scenario),
        Cell::new(format!("{:.1}s", o.seconds)),
    ];
    if let Some(e) = &o.error {
        first.extend([
            Cell::new("(could not run)"),
            Cell::new(""),
            cell(e.trim(), Some(Color::Red), color),
        ]);
        table.add_row(first);
        return;
    }
    // Failures first: they are what the reader came for.
    let mut checks: Vec<_> = o.checks.iter().collect();
    checks.sort_by_key(|c| c.ok);
    if checks.is_empty() {
        first.extend([
            Cell::new("(nothing expected)"),
            Cell::new(""),
            Cell::new(""),
        ]);
        table.add_row(first);
        return;
    }
    for (i, c) in checks.iter().enumerate() {
        let got = if c.ok || c.summary.is_empty() {
            c.got.clone()
        } else {
            format!("{}: {}", c.got, c.summary.trim())
        };
        let mut row = if i == 0 {
            std::mem::take(&mut first)
        } else {
            vec![Cell::new(""), Cell::new(""), Cell::new("")]
        };
        row.extend([
            Cell::new(&c.subject),
            Cell::new(&c.expected),
            cell(got, (!c.ok).then_some(Color::Red), color),
        ]);
        table.add_row(row);
    }
}

/// Draw the table (and with `verbose` every verdict) into `out`.
///
/// # Errors
/// The writer's I/O errors.
pub fn table(
    report: &ReplayReport,
    color: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut t = Table::new();
    t.force_no_tty()
        .load_style(TABLE_STYLE)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH);
    if color {
        t.enforce_styling().style_text_only();
    }
    t.set_header(["RESULT", "SCENARIO", "TIME", "SUBJECT", "EXPECTED", "GOT"]);
    for o in &report.scenarios {
        rows(o, color, &mut t);
    }
    writeln!(out, "{t}")?;
    if verbose {
        for o in &report.scenarios {
            writeln!(out)?;
            writeln!(out, "{} ({}):", o.scenario, o.file)?;
            for v in &o.verdicts {
                writeln!(
                    out,
                    "  {:<8} {:<12} {}: {}",
                    v.severity,
                    v.class,
                    v.subject,
                    v.summary.trim()
                )?;
            }
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}/{} scenarios passed in {:.1}s",
        report.passed,
        report.passed + report.failed,
        report.seconds
    )?;
    Ok(())
}
