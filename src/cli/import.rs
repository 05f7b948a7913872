//! `import FILE`: validate a bundle and print it back (also converts YAML ⇄ JSON).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{DocFormat, EXIT_OK};

/// Arguments of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A bundle file (YAML or JSON).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: DocFormat,
}

pub fn run(args: ImportArgs) -> anyhow::Result<u8> {
    let bundle = crate::bundle::load_bundle(&args.file)?;
    let text = match args.output {
        DocFormat::Yaml => bundle.to_yaml()?,
        DocFormat::Json => bundle.to_json()? + "\n",
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(EXIT_OK)
}
