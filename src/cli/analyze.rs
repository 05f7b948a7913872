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
use crate::engine::gate::exceeds;
use crate::engine::waivers::{Waivers, apply_waivers, check_rule_ids, parse_waivers};
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

impl FailOn {
    /// The lowest severity that fails the gate.
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Warning => Severity::Warning,
            FailOn::Critical => Severity::Critical,
        }
    }
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
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Format,
    /// Colour in the table: auto (a terminal, NO_COLOR unset), always or never.
    #[arg(long = "color", value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// The same as `-o wide` (kept for scripts written before it).
    #[arg(long, hide = true)]
    pub wide: bool,
    /// List every healthy subject in the table instead of one line that counts them.
    #[arg(long = "show-healthy")]
    pub show_healthy: bool,
    /// Only report verdicts of this class (repeatable).
    #[arg(long = "class", value_name = "CLASS", value_parser = class_parser(), ignore_case = true)]
    pub classes: Vec<Class>,
    /// Only report these subjects: KIND or KIND/NAME, NAME may end in `*` (repeatable). KIND is
    /// a subject kind in any case, singular or plural, or kubectl's short name where one exists
    /// (`apiservices/v1beta1.*`, `crd`, `mutatingwebhook/…`).
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
    /// A waivers file accepting known findings for a while (docs/waivers.md): `apiVersion:
    /// extpath.dev/v1alpha1`, `kind: Waivers`, and `waivers:` entries with `rule` (a rule id or
    /// `*`), `subject` (Kind/name, `*` globs), `reason` and `expires` (YYYY-MM-DD). Waived verdicts
    /// do not fail the gate; expired or unmatched waivers are reported.
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

/// `--class`: one of the classes, in any case. A possible-values parser, so that `--help`, the
/// shell scripts and `__complete` all offer them.
fn class_parser() -> impl clap::builder::TypedValueParser<Value = Class> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Class::ALL.map(|c| {
        clap::builder::PossibleValue::new(c.as_str()).help(crate::cli::explain::class_help(c))
    }))
    // Only the possible values get here, and each parses.
    .map(|s: String| Class::parse(&s).unwrap_or(Class::Inconclusive))
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
            Some(path) => Some(load_waivers_arg(path, &rules)?),
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

/// Read and check a `--waivers` file: its format, then that every rule it names exists (a typo
/// would otherwise waive nothing and be reported only as `unmatched`, after the collection).
///
/// # Errors
/// One line naming the file and the line of the problem, as an input error (exit 2).
fn load_waivers_arg(path: &std::path::Path, rules: &RuleSet) -> anyhow::Result<Waivers> {
    let input = super::input::read_input(path).map_err(input_error)?;
    let text = String::from_utf8_lossy(&input.bytes);
    let waivers = parse_waivers(&text, &input.shown).map_err(input_error)?;
    check_rule_ids(&waivers, &input.shown, |id| rules.get(id).is_some()).map_err(input_error)?;
    Ok(waivers)
}

impl Prepared {
    /// Classify a bundle, waivers applied.
    pub fn diagnose(&self, bundle: &crate::bundle::EvidenceBundle) -> Diagnosis {
        self.diagnose_until(bundle, None)
    }

    /// [`Prepared::diagnose`], the analysis stopping at `deadline` (`scan --timeout`).
    pub fn diagnose_until(
        &self,
        bundle: &crate::bundle::EvidenceBundle,
        deadline: Option<crate::engine::Deadline>,
    ) -> Diagnosis {
        let mut d = crate::engine::analyze_until(
            bundle,
            &self.rules,
            &self.settings,
            &self.filter,
            deadline,
        );
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
    let threshold = flags.fail_on.severity();
    let opts = RenderOptions {
        fail_on: threshold,
        elapsed: Some(super::started().elapsed()),
        show_healthy: flags.show_healthy,
        ..RenderOptions::for_stdout(flags.color, flags.wide)
    };
    let format = match flags.output {
        Format::Table if flags.wide => Format::Wide,
        other => other,
    };
    let mut out = super::report_out();
    render(d, format, &opts, &mut out)?;
    out.flush()?;
    Ok(if exceeds(d, threshold) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

/// Print a fleet report as the flags ask; the exit code is the worst cluster's.
///
/// # Errors
/// Write errors.
pub fn report_fleet(
    f: &crate::report::fleet::FleetDiagnosis,
    flags: &AnalyzeFlags,
) -> anyhow::Result<u8> {
    let opts = RenderOptions {
        fail_on: flags.fail_on.severity(),
        elapsed: Some(super::started().elapsed()),
        show_healthy: flags.show_healthy,
        ..RenderOptions::for_stdout(flags.color, flags.wide)
    };
    let format = match flags.output {
        Format::Table if flags.wide => Format::Wide,
        other => other,
    };
    let mut out = super::report_out();
    crate::report::fleet::render_fleet(f, format, &opts, &mut out)?;
    out.flush()?;
    Ok(f.summary.exit_code)
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    let prepared = args.flags.prepare()?;
    if let Some(dir) = args.source.fleet_dir() {
        return super::fleet::analyze_dir(dir, &args.flags, &prepared);
    }
    let bundle = args.source.load()?;
    let diagnosis = prepared.diagnose(&bundle);
    report(&diagnosis, &args.flags)
}
