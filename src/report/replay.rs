//! The output of `replay`: the `ReplayReport` document (`-o json`) and its table — one row per
//! scenario: pass or FAIL, its name, its time, and what was checked: each expected subject with its
//! class when it passed; on failure, each check that did not hold (which subject expected what,
//! what it got, and the verdict's summary). A last line gives the totals. `--verbose` lists every
//! verdict of every scenario under the table.
//!
//! What this module does not own: running scenarios (`cli::replay`), or deciding whether a verdict
//! meets an expectation (`engine::expect`); it only draws.

use std::io::Write;

use comfy_table::{
    Attribute, Cell, Color, ColumnConstraint, ContentArrangement, LineStyle, Table, TableStyle,
};

use serde::Serialize;

use crate::engine::Diagnosis;
use crate::engine::expect::Check;

/// Output of `replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplayFormat {
    /// A pass/fail table, with the mismatches of failing scenarios.
    Table,
    /// The `ReplayReport` document, for machines.
    Json,
}

/// The result of one scenario.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioOutcome {
    /// The scenario's `name`.
    pub scenario: String,
    /// Its file.
    pub file: String,
    /// No mismatch and no error.
    pub passed: bool,
    /// Wall time of start, scan, analysis and shutdown, seconds.
    pub seconds: f64,
    /// Each expectation and whether it held (failed ones first in the table).
    pub checks: Vec<Check>,
    /// Why the scenario could not be run to the end (then `passed` is false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every verdict: subject, class, severity and summary.
    pub verdicts: Vec<VerdictLine>,
}

/// One verdict, short.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictLine {
    /// `Kind/name`.
    pub subject: String,
    /// Class.
    pub class: String,
    /// Severity.
    pub severity: String,
    /// The verdict's summary.
    pub summary: String,
    /// The rules that decided it.
    pub rules: Vec<String>,
}

/// The `-o json` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// `extpath.dev/v1alpha1`.
    pub api_version: &'static str,
    /// `ReplayReport`.
    pub kind: &'static str,
    /// Scenarios that passed.
    pub passed: usize,
    /// Scenarios that did not.
    pub failed: usize,
    /// Wall time of the whole run, seconds.
    pub seconds: f64,
    /// One per scenario, in file order.
    pub scenarios: Vec<ScenarioOutcome>,
}

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
        // A passing row still lists what it proved: "pass" alone cannot tell a scenario that
        // checked the verdict of every subject from one that expected nothing.
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
        // Only the checks that failed: they are what someone must read, and a scenario with
        // twenty subjects would bury the one mismatch among nineteen passes.
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

/// Every verdict of `d`, short, in display order (worst first).
pub fn verdict_lines(d: &Diagnosis) -> Vec<VerdictLine> {
    super::display_order(d)
        .into_iter()
        .map(|v| VerdictLine {
            subject: v.subject.to_string(),
            class: v.class.to_string(),
            severity: v.severity.to_string(),
            summary: v.summary.clone(),
            rules: v.rules.iter().map(|r| r.id.clone()).collect(),
        })
        .collect()
}

/// Write `replay`'s output in `format`: the table (drawn with `look`), or the document as pretty
/// JSON with a final newline.
///
/// # Errors
/// The writer's I/O errors.
pub fn write(
    out: &mut dyn Write,
    format: ReplayFormat,
    report: &ReplayReport,
    look: Look,
) -> std::io::Result<()> {
    match format {
        ReplayFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, report).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        }
        ReplayFormat::Table => table(report, look, out),
    }
}
