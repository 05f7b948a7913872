//! `import FILE`: validate a bundle and print it back (also converts YAML ⇄ JSON); `import -`
//! reads it from stdin.
//! `import --raw PATH...`: build a bundle from raw incident files and print it.
//!
//! [`BundleSource`] (shared with `analyze`) reads FILE through [`super::input`]: `-` is stdin, a
//! FIFO is read like stdin, a directory is refused with the `--raw` that reads it.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{DocFormat, EXIT_OK};

/// Evidence named on the command line: a bundle file, or raw incident files (`import`, `analyze`).
#[derive(Debug, Args)]
pub struct BundleSource {
    /// A bundle file (YAML or JSON); `-` reads it from stdin. `analyze` also reads a fleet
    /// bundle directory (`collect --context a,b --output-dir DIR`).
    #[arg(
        value_name = "FILE",
        required_unless_present = "raw",
        conflicts_with = "raw"
    )]
    file: Option<PathBuf>,
    /// Build the bundle from raw files and directories instead: kubectl output, /metrics dumps,
    /// certificates, curl output, logs (kinds are told from content, see docs/raw-import.md).
    #[arg(long = "raw", value_name = "PATH", num_args = 1..)]
    raw: Vec<PathBuf>,
    /// With --raw: fail (exit 2) on any file that cannot be read as the kind its content shows —
    /// malformed, cut short, unreadable, too large, invalid UTF-8 — also inside a directory, where
    /// it is otherwise recorded as an `unreadable` gap while the rest of the folder is used. Files
    /// of no known kind inside a directory are still only skipped.
    #[arg(long = "strict", requires = "raw")]
    strict: bool,
}

impl BundleSource {
    /// The fleet bundle directory named as FILE, if it is one.
    pub fn fleet_dir(&self) -> Option<&std::path::Path> {
        self.file
            .as_deref()
            .filter(|p| super::fleet::is_fleet_dir(p))
    }

    /// The bundle: loaded and validated, or imported from the raw files.
    ///
    /// # Errors
    /// A bad bundle or raw file, naming the file (exit code 2 at the edge).
    pub fn load(&self) -> anyhow::Result<crate::bundle::EvidenceBundle> {
        Ok(match &self.file {
            Some(file) => load_bundle_arg(file)?,
            None => {
                for p in &self.raw {
                    super::input::check_raw_path(p).map_err(super::input_error)?;
                }
                crate::bundle::raw::import_paths_with(
                    &self.raw,
                    jiff::Timestamp::now(),
                    crate::bundle::raw::ImportOptions {
                        strict: self.strict,
                        ..crate::bundle::raw::ImportOptions::default()
                    },
                )?
            }
        })
    }
}

/// Load a bundle named on the command line (FILE, `--merge`, `replay serve --bundle`): `-` for
/// stdin, a FIFO read like stdin, a directory refused with the `--raw` that reads it.
///
/// # Errors
/// One line naming the file and place, as an input error (exit 2).
pub fn load_bundle_arg(path: &std::path::Path) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    let input = super::input::read_input(path).map_err(super::input_error)?;
    let text = std::str::from_utf8(&input.bytes).map_err(|e| {
        super::input_error(format!(
            "{}: not a text file (invalid UTF-8 at byte {})",
            input.shown,
            e.valid_up_to()
        ))
    })?;
    crate::bundle::load_bundle_str(text, &input.shown).map_err(super::input_error)
}

/// Arguments of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    source: BundleSource,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: DocFormat,
}

pub fn run(args: ImportArgs) -> anyhow::Result<u8> {
    let bundle = args.source.load()?;
    let text = match args.output {
        DocFormat::Yaml => bundle.to_yaml()?,
        DocFormat::Json => bundle.to_json()? + "\n",
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(EXIT_OK)
}
