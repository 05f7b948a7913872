//! The fleet report: one diagnosis per cluster (`scan --context a,b,c`, `--all-contexts`,
//! `analyze DIR`) as one document — the [`FleetDiagnosis`] contract (`docs/fleet.schema.json`) and
//! its table, Markdown and JUnit renderings.
//!
//! A cluster that could not be collected is a row of its own with its exit code and the error, never
//! a reason to drop the others. Each cluster's part is rendered by the single-cluster renderer, so a
//! fleet report reads like the reports people already know, grouped under a fleet headline.
//!
//! What this module does not own: collecting (the CLI runs the clusters) and deciding (each
//! cluster's verdicts are the engine's; only the per-cluster exit code is computed here, with the
//! same gate `scan` uses).

use std::io::Write;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Format, RenderOptions, render};
use crate::engine::diagnosis::{Diagnosis, Severity};
use crate::engine::gate;

/// The `apiVersion` of the fleet document.
pub const FLEET_API_VERSION: &str = "extpath.dev/v1alpha1";

/// Exit code of a cluster with nothing at or above `--fail-on`.
const EXIT_OK: u8 = 0;
/// Exit code of a cluster with findings at or above `--fail-on`.
const EXIT_FINDINGS: u8 = 1;

/// Several clusters' diagnoses (`scan --context a,b,c -o json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FleetDiagnosis {
    /// `extpath.dev/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `FleetDiagnosis`.
    pub kind: String,
    /// Totals over the clusters.
    pub summary: FleetSummary,
    /// One entry per cluster, in the order the contexts were given (the kubeconfig's order for
    /// `--all-contexts`).
    pub clusters: Vec<ClusterDiagnosis>,
}

/// Totals over the clusters of a fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FleetSummary {
    /// Clusters scanned.
    pub clusters: usize,
    /// Clusters with a finding at `warning` or above not waived, or that could not be collected.
    pub with_problems: usize,
    /// Clusters that could not be collected (unreachable, every read refused, an unusable
    /// kubeconfig entry).
    pub not_collected: usize,
    /// The run's exit code: the worst cluster's (README, "Exit codes").
    pub exit_code: u8,
    /// One line for humans: `2 of 3 clusters have problems: prod (critical, 2 problems), …`.
    pub headline: String,
}

/// One cluster of a fleet: the single-cluster Diagnosis document (its fields inline) plus the
/// context and server it came from, or the error that kept it from being collected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterDiagnosis {
    /// The kubeconfig context.
    pub context: String,
    /// The API server's URL, when the kubeconfig (or `--server`) names one.
    pub server: Option<String>,
    /// This cluster's exit code, as `scan --context` with it alone would exit: 0, 1 (findings at
    /// or above `--fail-on`), 2 (its kubeconfig entry cannot be used) or 3 (not collected).
    pub exit_code: u8,
    /// Why the cluster could not be collected (exit codes 2 and 3); absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The cluster's Diagnosis (docs/diagnosis.schema.json), absent when it could not be
    /// collected.
    // Flattened so that each cluster entry is a Diagnosis document plus three fields, and a
    // consumer of `scan -o json` reads a fleet's clusters with the same code.
    #[serde(flatten)]
    pub diagnosis: Option<Diagnosis>,
}

impl ClusterDiagnosis {
    /// A collected cluster, with its exit code under `fail_on`.
    pub fn diagnosed(
        context: String,
        server: Option<String>,
        d: Diagnosis,
        fail_on: Severity,
    ) -> Self {
        ClusterDiagnosis {
            context,
            server,
            exit_code: if gate::exceeds(&d, fail_on) {
                EXIT_FINDINGS
            } else {
                EXIT_OK
            },
            error: None,
            diagnosis: Some(d),
        }
    }

    /// A cluster that could not be collected.
    pub fn failed(context: String, server: Option<String>, exit_code: u8, error: String) -> Self {
        ClusterDiagnosis {
            context,
            server,
            exit_code,
            error: Some(error),
            diagnosis: None,
        }
    }

    /// Whether it belongs in the headline: not collected, or a finding at warning or above that
    /// is not waived (below `--fail-on` too: a warning is still worth reading).
    pub fn has_problems(&self) -> bool {
        match &self.diagnosis {
            None => true,
            Some(d) => d.summary.worst >= Severity::Warning,
        }
    }

    /// `critical, 2 problems` / `not collected (exit 3)`: what the headline says about it.
    pub fn brief(&self) -> String {
        let Some(d) = &self.diagnosis else {
            return format!("not collected, exit {}", self.exit_code);
        };
        let open = crate::engine::problems::open(&d.problems).count();
        let unjudged = d
            .verdicts
            .iter()
            .filter(|v| {
                v.class == crate::engine::diagnosis::Class::Inconclusive && v.waived.is_none()
            })
            .count();
        let mut parts = vec![d.summary.worst.to_string()];
        if open > 0 {
            parts.push(plural(open, "problem", "problems"));
        }
        if unjudged > 0 {
            parts.push(format!("{unjudged} unjudged"));
        }
        parts.join(", ")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How bad an exit code is for the fleet's own: a cluster whose kubeconfig entry cannot be used
/// (2) over one not collected (3) over findings (1) over nothing (0).
///
/// Not numeric order: 3 outranks 1 because a cluster nobody could read may hide any finding, so
/// the fleet must not report "found something" as if the rest were known; 2 outranks both because
/// it is the caller's own input to fix (DESIGN §4: 2 is a usage or input error), and a CI job
/// that keeps failing on it should say so rather than blame the cluster.
fn exit_rank(code: u8) -> u8 {
    match code {
        0 => 0,
        1 => 1,
        3 => 2,
        _ => 3,
    }
}

/// The worst of the clusters' exit codes (0 for none).
pub fn worst_exit(codes: impl IntoIterator<Item = u8>) -> u8 {
    codes.into_iter().max_by_key(|c| exit_rank(*c)).unwrap_or(0)
}

impl FleetDiagnosis {
    /// The fleet document of these clusters, totals and headline computed.
    pub fn new(clusters: Vec<ClusterDiagnosis>) -> Self {
        let troubled: Vec<&ClusterDiagnosis> =
            clusters.iter().filter(|c| c.has_problems()).collect();
        let headline = if troubled.is_empty() {
            format!(
                "no cluster has problems ({})",
                plural(clusters.len(), "cluster", "clusters")
            )
        } else {
            let named: Vec<String> = troubled
                .iter()
                .map(|c| format!("{} ({})", c.context, c.brief()))
                .collect();
            format!(
                "{} of {} {} problems: {}",
                troubled.len(),
                plural(clusters.len(), "cluster", "clusters"),
                if troubled.len() == 1 { "has" } else { "have" },
                named.join(", ")
            )
        };
        FleetDiagnosis {
            api_version: FLEET_API_VERSION.to_string(),
            kind: "FleetDiagnosis".to_string(),
            summary: FleetSummary {
                clusters: clusters.len(),
                with_problems: troubled.len(),
                not_collected: clusters.iter().filter(|c| c.diagnosis.is_none()).count(),
                exit_code: worst_exit(clusters.iter().map(|c| c.exit_code)),
                headline,
            },
            clusters,
        }
    }
}

/// Render a fleet in `format` into `out`.
///
/// # Errors
/// Only the writer's I/O errors.
pub fn render_fleet(
    f: &FleetDiagnosis,
    format: Format,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, f).map_err(std::io::Error::other)?;
            writeln!(out)
        }
        Format::Yaml => {
            let text = serde_saphyr::to_string(f).map_err(std::io::Error::other)?;
            out.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
            Ok(())
        }
        Format::Table | Format::Wide => table(f, format, opts, out),
        Format::Markdown => markdown(f, out),
        Format::Junit => junit(f, opts, out),
    }
}

fn server_text(c: &ClusterDiagnosis) -> &str {
    c.server.as_deref().unwrap_or("(no server)")
}

/// The table: the fleet headline, then a section per cluster with problems (the single-cluster
/// table, or the error), then one line per cluster without.
fn table(
    f: &FleetDiagnosis,
    format: Format,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let bold = |s: &str| {
        if opts.color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    };
    writeln!(out, "{}", bold(&f.summary.headline))?;
    for c in f.clusters.iter().filter(|c| c.has_problems()) {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            bold(&format!(
                "══ cluster {} ({}): {}",
                c.context,
                server_text(c),
                match c.diagnosis {
                    Some(_) => format!("{}; exit {}", c.brief(), c.exit_code),
                    None => c.brief(),
                }
            ))
        )?;
        match (&c.diagnosis, &c.error) {
            (Some(d), _) => render(d, format, opts, out)?,
            (None, error) => writeln!(
                out,
                "could not be collected: {}",
                error.as_deref().unwrap_or("unknown error")
            )?,
        }
    }
    // Clusters without problems get one line each: with thirty contexts, the three that need
    // someone must not scroll away under twenty-seven full tables.
    let fine: Vec<&ClusterDiagnosis> = f.clusters.iter().filter(|c| !c.has_problems()).collect();
    if !fine.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", bold("══ clusters without problems"))?;
        for c in fine {
            let what = c
                .diagnosis
                .as_ref()
                .map(super::severity_counts)
                .unwrap_or_default();
            writeln!(
                out,
                "{} ({}): {what}; exit {}",
                c.context,
                server_text(c),
                c.exit_code
            )?;
        }
    }
    Ok(())
}

/// Markdown: a title, the headline, an overview table of the clusters, then a section per cluster
/// — the single-cluster document with its headings one level down, or the error.
fn markdown(f: &FleetDiagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "# extpath fleet diagnosis")?;
    writeln!(out)?;
    writeln!(out, "**{}**", md_text(&f.summary.headline))?;
    writeln!(out)?;
    writeln!(out, "| Context | Server | Exit | Status |")?;
    writeln!(out, "|---|---|---|---|")?;
    for c in &f.clusters {
        writeln!(
            out,
            "| `{}` | `{}` | {} | {} |",
            md_text(&c.context).replace('`', "'"),
            md_text(server_text(c)).replace('`', "'"),
            c.exit_code,
            md_text(&c.brief())
        )?;
    }
    for c in &f.clusters {
        writeln!(out)?;
        writeln!(out, "## Cluster {}", md_text(&c.context))?;
        writeln!(out)?;
        writeln!(
            out,
            "Server {}; exit code {}.",
            md_text(server_text(c)),
            c.exit_code
        )?;
        match &c.diagnosis {
            Some(d) => {
                let mut one = Vec::new();
                super::markdown::render(d, &mut one)?;
                writeln!(out)?;
                out.write_all(demote_headings(&String::from_utf8_lossy(&one)).as_bytes())?;
            }
            None => {
                writeln!(out)?;
                writeln!(
                    out,
                    "Could not be collected: {}",
                    md_text(c.error.as_deref().unwrap_or("unknown error"))
                )?;
            }
        }
    }
    Ok(())
}

/// Escape what Markdown would read as markup in a name or message.
fn md_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '\\' | '*' | '_' | '|' | '<' | '>' | '[' | ']' | '#') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}

/// Every ATX heading one level down (`#` → `##`), except inside fenced code.
fn demote_headings(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len() + 64);
    let mut fence: Option<String> = None;
    for line in doc.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let ticks: String = trimmed.chars().take_while(|c| *c == '`').collect();
        match &fence {
            Some(open) if ticks.len() >= open.len() && trimmed.trim_end() == ticks => {
                fence = None;
            }
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None if line.starts_with('#') => out.push('#'),
            None => {}
        }
        out.push_str(line);
    }
    out
}

/// JUnit: one `<testsuite>` per cluster, named by its context, under one `<testsuites>` root; a
/// cluster that could not be collected is a suite with one test case in `<error>`.
fn junit(f: &FleetDiagnosis, opts: &RenderOptions, out: &mut dyn Write) -> std::io::Result<()> {
    use super::junit::{Tally, attr, body, tally, write_suite};
    let per: Vec<Tally> = f
        .clusters
        .iter()
        .map(|c| match &c.diagnosis {
            Some(d) => tally(d, opts),
            None => Tally {
                tests: 1,
                errors: 1,
                ..Tally::default()
            },
        })
        .collect();
    let total = per.iter().fold(Tally::default(), |a, t| a.add(*t));
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(out, r#"<testsuites name="extpath" {}>"#, total.attrs(opts))?;
    for (c, t) in f.clusters.iter().zip(&per) {
        let props = [
            ("context", c.context.clone()),
            ("server", server_text(c).to_string()),
            ("exit-code", c.exit_code.to_string()),
        ];
        match &c.diagnosis {
            Some(d) => write_suite(out, d, opts, &c.context, &props)?,
            None => {
                writeln!(
                    out,
                    r#"  <testsuite name="{}" {}>"#,
                    attr(&c.context),
                    t.attrs(opts)
                )?;
                writeln!(out, "    <properties>")?;
                for (name, value) in &props {
                    writeln!(
                        out,
                        r#"      <property name="{name}" value="{}"/>"#,
                        attr(value)
                    )?;
                }
                writeln!(out, "    </properties>")?;
                let error = c.error.as_deref().unwrap_or("unknown error");
                writeln!(
                    out,
                    r#"    <testcase classname="Cluster" name="{}" time="0">"#,
                    attr(&c.context)
                )?;
                writeln!(
                    out,
                    r#"      <error message="{}" type="NotCollected">{}</error>"#,
                    attr(error),
                    body(&format!(
                        "cluster {} ({}) could not be collected (exit {}): {error}",
                        c.context,
                        server_text(c),
                        c.exit_code
                    ))
                )?;
                writeln!(out, "    </testcase>")?;
                writeln!(out, "  </testsuite>")?;
            }
        }
    }
    writeln!(out, "</testsuites>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_exit_code_ranks_input_over_unreachable_over_findings() {
        assert_eq!(worst_exit([]), 0);
        assert_eq!(worst_exit([0, 1, 0]), 1);
        assert_eq!(worst_exit([1, 3, 0]), 3);
        assert_eq!(worst_exit([3, 2, 1]), 2);
    }

    #[test]
    fn headings_move_down_outside_fences_only() {
        let doc = "# Title\n\ntext\n\n```sh\n# a shell comment\n```\n## Sub\n";
        assert_eq!(
            demote_headings(doc),
            "## Title\n\ntext\n\n```sh\n# a shell comment\n```\n### Sub\n"
        );
    }
}
