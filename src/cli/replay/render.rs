//! The human output of `replay`: one table row per scenario — pass or FAIL, its name, its time,
//! and what was checked: each expected subject with its class when it passed; on failure, each
//! check that did not hold (which subject expected what, what it got, and the verdict's summary).
//! A last line gives the totals. `--verbose` lists every verdict of every scenario under the table.
//! The JSON document is serialised in `run.rs`; this file only draws.

use std::io::Write;

use comfy_table::{
    Attribute, Cell, Color, ColumnConstraint, ContentArrangement, LineStyle, Table, TableStyle,
};

use super::expect::Check;
use super::run::{ReplayReport, ScenarioOutcome};

/// The same look as the verdict table: a rule under the header, no vertical lines.
const TABLE_STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// How to draw.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// ANSI colour.
    pub color: bool,
    /// Line width on a terminal; `None` (piped) draws every row on one line, so `grep` finds
    /// a whole expectation.
    pub width: Option<u16>,
    /// Every verdict under the table.
    pub verbose: bool,
}

fn painted(text: impl Into<String>, color: Color, on: bool) -> Cell {
    let c = Cell::new(text.into());
    if on {
        c.fg(color).add_attribute(Attribute::Bold)
    } else {
        c
    }
}

fn failed_line(c: &Check) -> String {
    let mut line = format!("{}: expected {}, got {}", c.subject, c.expected, c.got);
    let summary = c.summary.trim();
    if !summary.is_empty() {
        line.push_str(" — ");
        line.push_str(summary);
    }
    line
}

fn row(o: &ScenarioOutcome, look: Look) -> Vec<Cell> {
    let result = if o.passed {
        painted("pass", Color::Green, look.color)
    } else {
        painted("FAIL", Color::Red, look.color)
    };
    let checks = if let Some(e) = &o.error {
        format!("could not run: {}", e.trim())
    } else if o.passed {
        let lines: Vec<String> = o
            .checks
            .iter()
            .map(|c| format!("{}: {}", c.subject, c.expected))
            .collect();
        if lines.is_empty() {
            "(nothing expected)".into()
        } else {
            lines.join("\n")
        }
    } else {
        o.checks
            .iter()
            .filter(|c| !c.ok)
            .map(failed_line)
            .collect::<Vec<_>>()
            .join("\n")
    };
    vec![
        result,
        Cell::new(&o.scenario),
        Cell::new(format!("{:.1}s", o.seconds)),
        Cell::new(checks),
    ]
}

/// Draw the table (and with `look.verbose` every verdict) into `out`.
///
/// # Errors
/// The writer's I/O errors.
pub fn table(report: &ReplayReport, look: Look, out: &mut dyn Write) -> std::io::Result<()> {
    let mut t = Table::new();
    t.force_no_tty()
        .load_style(TABLE_STYLE)
        .set_content_arrangement(match look.width {
            Some(_) => ContentArrangement::Dynamic,
            None => ContentArrangement::Disabled,
        });
    if let Some(w) = look.width {
        t.set_width(w);
    }
    if look.color {
        t.enforce_styling().style_text_only();
    }
    t.set_header(["RESULT", "SCENARIO", "TIME", "EXPECTED (GOT, ON FAILURE)"]);
    for o in &report.scenarios {
        t.add_row(row(o, look));
    }
    // Names are never wrapped: a wrapped name cannot be searched for or copied.
    for i in 0..3 {
        if let Some(c) = t.column_mut(i) {
            c.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    writeln!(out, "{t}")?;
    if look.verbose {
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
