//! `analyze FILE` / `analyze --raw PATH...`: classify evidence offline and print the Diagnosis.
//!
//! This file parses arguments, loads the bundle and the rules, calls [`crate::engine::analyze`],
//! applies waivers, renders through [`crate::report`] and maps the worst verdict not waived to an exit
//! code (`--fail-on`, DESIGN §4). [`AnalyzeFlags`] and [`Prepared`] are shared by every command that
//! classifies (`scan`, `why`, `replay`), so they all accept the same options.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{EXIT_FINDINGS, EXIT_OK, input_error};
use crate::engine::waivers::{Waivers, apply_waivers, exceeds, load_waivers};
use crate::engine::{
    Class, Diagnosis, Filter, RuleSet, Settings, Severity, filter::SubjectPattern,
};
use crate::report::{ColorChoice, Format, RenderOptions, render};

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

/// What every command that classifies shares (`analyze`, `scan`, `why`): output, filters,
/// settings, waivers and the gate.
#[derive(Debug, Args, Clone)]
pub struct AnalyzeFlags {
    /// Output format: table (default), json (the machine contract), yaml, markdown (incident
    /// documents) or junit (one test case per subject, for CI).
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Format,
    /// Colour in the table: auto (a terminal, NO_COLOR unset), always or never.
    #[arg(long = "color", value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// Show each verdict's rung, confidence, evidence and consequences as table columns.
    #[arg(long)]
    pub wide: bool,
    /// List every healthy subject in the table instead of one line that counts them.
    #[arg(long = "show-healthy")]
    pub show_healthy: bool,
    /// Only report verdicts of this class (repeatable).
    #[arg(long = "class", value_name = "CLASS", value_parser = parse_class)]
    pub classes: Vec<Class>,
    /// Only report these subjects: KIND or KIND/NAME, NAME may end in `*` (repeatable).
    #[arg(long = "subject", value_name = "KIND[/NAME]")]
    pub subjects: Vec<SubjectPattern>,
    /// Run only this rule (repeatable).
    #[arg(long = "rule", value_name = "ID")]
    pub rules: Vec<String>,
    /// Do not run this rule (repeatable).
    #[arg(long = "skip-rule", value_name = "ID")]
    pub skip_rules: Vec<String>,
    /// Set a rule setting, e.g. `cert_warn_days=14` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A waivers file for CI gates (rule, subject, reason, expiry); expired or unmatched waivers
    /// are reported.
    #[arg(long = "waivers", value_name = "FILE")]
    pub waivers: Option<PathBuf>,
    /// Exit 1 when a verdict not waived is at or above this severity (Inconclusive counts as warning).
    #[arg(long = "fail-on", value_enum, default_value = "critical")]
    pub fail_on: FailOn,
    #[command(flatten)]
    pub rule_args: RuleArgs,
}

/// Arguments of `analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    source: super::import::BundleSource,
    #[command(flatten)]
    flags: AnalyzeFlags,
}

fn parse_class(s: &str) -> Result<Class, String> {
    Class::parse(s).ok_or_else(|| {
        format!(
            "unknown class {s:?} (one of {})",
            Class::ALL.map(|c| c.as_str()).join(", ")
        )
    })
}

/// Everything needed to classify, checked before any evidence is gathered (a typo in `--rule`
/// should not cost a 10-second collection).
pub struct Prepared {
    rules: RuleSet,
    settings: Settings,
    filter: Filter,
    waivers: Option<Waivers>,
}

impl AnalyzeFlags {
    /// Load rules, settings and waivers; check rule ids.
    ///
    /// # Errors
    /// Input errors (exit 2): a rule that does not load, an unknown rule id or setting, a bad
    /// waivers file.
    pub fn prepare(&self) -> anyhow::Result<Prepared> {
        let settings =
            Settings::with_assignments(&self.set).map_err(|e| input_error(e.to_string()))?;
        let rules = self.rule_args.load()?;
        for id in self.rules.iter().chain(&self.skip_rules) {
            if rules.get(id).is_none() {
                return Err(input_error(format!(
                    "--rule/--skip-rule {id:?}: no such rule"
                )));
            }
        }
        let waivers = match &self.waivers {
            Some(path) => Some(load_waivers(path).map_err(|e| input_error(e.to_string()))?),
            None => None,
        };
        Ok(Prepared {
            rules,
            settings,
            filter: Filter {
                classes: self.classes.clone(),
                subjects: self.subjects.clone(),
                rules: self.rules.clone(),
                skip_rules: self.skip_rules.clone(),
            },
            waivers,
        })
    }
}

impl Prepared {
    /// Classify a bundle, waivers applied.
    pub fn diagnose(&self, bundle: &crate::bundle::EvidenceBundle) -> Diagnosis {
        let mut d = crate::engine::analyze(bundle, &self.rules, &self.settings, &self.filter);
        if let Some(w) = &self.waivers {
            apply_waivers(&mut d, w, jiff::Zoned::now().date());
        }
        d
    }
}

/// Print a diagnosis as the flags ask and return the exit code of the gate.
///
/// # Errors
/// Write errors.
pub fn report(d: &Diagnosis, flags: &AnalyzeFlags) -> anyhow::Result<u8> {
    let opts = RenderOptions {
        show_healthy: flags.show_healthy,
        ..RenderOptions::for_stdout(flags.color, flags.wide)
    };
    let mut out = std::io::stdout().lock();
    render(d, flags.output, &opts, &mut out)?;
    out.flush()?;
    let threshold = match flags.fail_on {
        FailOn::Warning => Severity::Warning,
        FailOn::Critical => Severity::Critical,
    };
    Ok(if exceeds(d, threshold) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    let prepared = args.flags.prepare()?;
    let bundle = args.source.load()?;
    let diagnosis = prepared.diagnose(&bundle);
    report(&diagnosis, &args.flags)
}
