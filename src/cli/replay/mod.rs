//! `replay`: the bundled reference server from the command line.
//!
//! * `replay serve SCENARIO` — serve one scenario until interrupted, for kubectl and other clients;
//!   `replay serve --bundle FILE` / `--raw PATH…` — serve a recorded incident back the same way.

mod serve;

use clap::{Args, Subcommand};

/// Arguments of `replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(subcommand)]
    command: ReplayCommand,
}

#[derive(Debug, Subcommand)]
enum ReplayCommand {
    /// Serve one scenario, or a recorded incident (--bundle, --raw), on 127.0.0.1 until
    /// interrupted, for kubectl and other real clients.
    Serve(serve::ServeArgs),
}

pub fn run(args: ReplayArgs) -> anyhow::Result<u8> {
    match args.command {
        ReplayCommand::Serve(a) => serve::run(a),
    }
}
