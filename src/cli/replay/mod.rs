//! `replay`: the bundled reference server from the command line.
//!
//! * `replay SCENARIO...` / `replay --all` — run scenarios end to end (start, scan, classify) and
//!   compare every verdict with the scenario's `expect:` block; exit 1 on any mismatch.
//! * `replay serve SCENARIO` — serve one scenario until interrupted, for kubectl and other clients;
//!   `replay serve --bundle FILE` / `--raw PATH…` — serve a recorded incident back the same way.
//!
//! Comparing the verdicts with a scenario's expectations is the engine's (`engine::expect`);
//! the table and the `ReplayReport` document are the report's (`report::replay`).

mod run;
mod serve;

use clap::{Args, Subcommand};

/// Arguments of `replay`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReplayArgs {
    #[command(subcommand)]
    command: Option<ReplayCommand>,
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Debug, Subcommand)]
enum ReplayCommand {
    /// Serve one scenario, or a recorded incident (--bundle, --raw), on 127.0.0.1 until
    /// interrupted, for kubectl and other real clients.
    Serve(serve::ServeArgs),
}

pub fn run(args: ReplayArgs) -> anyhow::Result<u8> {
    match args.command {
        Some(ReplayCommand::Serve(a)) => serve::run(a),
        None => run::run(args.run),
    }
}
