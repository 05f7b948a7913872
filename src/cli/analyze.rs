//! `analyze FILE` / `analyze --raw PATH...`: classify evidence offline and print the Diagnosis.
//!
//! This file parses arguments, loads the bundle and the rules, calls [`crate::engine::analyze`], and
//! maps the worst verdict to an exit code (`--fail-on`, DESIGN §4). Writing the Diagnosis is one small
//! function, [`write_diagnosis`], so that the table/markdown/junit renderers can replace the plain
//! listing without touching the rest.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{CliError, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::engine::{
    Class, Diagnosis, Filter, RuleSet, Settings, Severity, filter::SubjectPattern,
};

/// Output formats of `analyze`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A listing for humans.
    Table,
    /// The Diagnosis as JSON (the machine contract).
    Json,
    /// The Diagnosis as YAML.
    Yaml,
}

/// The lowest severity that makes `analyze` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Warnings and critical verdicts (and Inconclusive ones).
    Warning,
    /// Critical verdicts only.
    Critical,
}

/// Rule selection, rule directories and settings shared by `analyze`, `explain` and `rules`.
#[derive(Debug, Args, Clone, Default)]
pub struct RuleArgs {
    /// A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error.
    #[arg(long = "rules", value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
}

impl RuleArgs {
    /// The bundled rules plus `--rules DIR`.
    ///
    /// # Errors
    /// A rule that does not load (`file:line: message`), as an input error.
    pub fn load(&self) -> anyhow::Result<RuleSet> {
        let set = match &self.rules_dir {
            Some(d) => RuleSet::bundled_with_dir(d)?,
            None => RuleSet::bundled_checked()?,
        };
        Ok(set)
    }
}

/// Arguments of `analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// An evidence bundle (YAML or JSON).
    #[arg(
        value_name = "FILE",
        required_unless_present = "raw",
        conflicts_with = "raw"
    )]
    file: Option<PathBuf>,
    /// Raw incident files or directories (kubectl output, /metrics dumps, logs, curl output …).
    #[arg(long = "raw", value_name = "PATH", num_args = 1..)]
    raw: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: OutputFormat,
    /// Only report verdicts of this class (repeatable).
    #[arg(long = "class", value_name = "CLASS", value_parser = parse_class)]
    classes: Vec<Class>,
    /// Only report these subjects: KIND or KIND/NAME, NAME may end in `*` (repeatable).
    #[arg(long = "subject", value_name = "KIND[/NAME]")]
    subjects: Vec<SubjectPattern>,
    /// Run only this rule (repeatable).
    #[arg(long = "rule", value_name = "ID")]
    rules: Vec<String>,
    /// Do not run this rule (repeatable).
    #[arg(long = "skip-rule", value_name = "ID")]
    skip_rules: Vec<String>,
    /// Set a rule setting, e.g. `cert_warn_days=14` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Exit 1 when a verdict is at or above this severity.
    #[arg(long = "fail-on", value_enum, default_value = "critical")]
    fail_on: FailOn,
    #[command(flatten)]
    rule_args: RuleArgs,
}

fn parse_class(s: &str) -> Result<Class, String> {
    Class::parse(s).ok_or_else(|| {
        format!(
            "unknown class {s:?} (one of {})",
            Class::ALL.map(|c| c.as_str()).join(", ")
        )
    })
}

fn input_error(message: String) -> anyhow::Error {
    CliError {
        code: EXIT_INPUT,
        message,
    }
    .into()
}

/// Load the bundle named on the command line: a bundle file, or raw files imported.
fn load_bundle(args: &AnalyzeArgs) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    match &args.file {
        Some(file) => Ok(crate::bundle::load_bundle(file)?),
        None => Ok(crate::bundle::raw::import_paths(&args.raw)?),
    }
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    let settings = Settings::with_assignments(&args.set).map_err(|e| input_error(e.to_string()))?;
    let rules = args.rule_args.load()?;
    for id in args.rules.iter().chain(&args.skip_rules) {
        if rules.get(id).is_none() {
            return Err(input_error(format!(
                "--rule/--skip-rule {id:?}: no such rule"
            )));
        }
    }
    let bundle = load_bundle(&args)?;
    let filter = Filter {
        classes: args.classes.clone(),
        subjects: args.subjects.clone(),
        rules: args.rules.clone(),
        skip_rules: args.skip_rules.clone(),
    };
    let diagnosis = crate::engine::analyze(&bundle, &rules, &settings, &filter);
    let mut out = std::io::stdout().lock();
    write_diagnosis(&diagnosis, args.output, &mut out)?;
    out.flush()?;
    let threshold = match args.fail_on {
        FailOn::Warning => Severity::Warning,
        FailOn::Critical => Severity::Critical,
    };
    Ok(if diagnosis.summary.worst >= threshold {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

/// Write a Diagnosis in a format. The one place output is produced.
///
/// # Errors
/// Serialisation or write errors.
pub fn write_diagnosis(
    d: &Diagnosis,
    format: OutputFormat,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, d)?;
            writeln!(out)?;
        }
        OutputFormat::Yaml => out.write_all(serde_saphyr::to_string(d)?.as_bytes())?,
        OutputFormat::Table => write_listing(d, out)?,
    }
    Ok(())
}

fn write_listing(d: &Diagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    for v in &d.verdicts {
        writeln!(
            out,
            "{:<8}  {:<12}  {}",
            v.severity.as_str().to_uppercase(),
            v.class.as_str(),
            v.subject
        )?;
        writeln!(out, "    {}", v.summary)?;
        if !v.rules.is_empty() {
            let ids: Vec<&str> = v.rules.iter().map(|r| r.id.as_str()).collect();
            writeln!(
                out,
                "    rules: {} (confidence {:.2})",
                ids.join(", "),
                v.confidence
            )?;
        }
        for r in &v.ruled_out {
            writeln!(out, "    ruled out {}: {}", r.class, r.because)?;
        }
        for c in &v.consequences {
            writeln!(
                out,
                "    consequence ({}, {}): {}",
                c.class, c.rung, c.summary
            )?;
        }
        for c in &v.history {
            writeln!(out, "    history ({}): {}", c.class, c.summary)?;
        }
        for n in &v.next {
            writeln!(out, "    next: {n}")?;
        }
    }
    if !d.gaps.is_empty() {
        writeln!(out, "gaps:")?;
        for g in &d.gaps {
            let reason = serde_json::to_value(g.reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            writeln!(out, "    {} ({reason}) {}", g.source, g.detail)?;
        }
    }
    writeln!(out, "{}", d.summary.headline)
}
