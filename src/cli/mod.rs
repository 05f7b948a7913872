//! The command line: clap definitions, dispatch, and the mapping of outcomes to exit codes.
//!
//! One file per subcommand; none of them holds domain logic — they parse arguments, call into
//! `bundle`, `engine`, `collect`, `report` or `refserver`, and write to stdout. Errors are printed
//! here, once, with their context chain.
//!
//! Exit codes (DESIGN §4, like `kubectl diff`): 0 nothing at or above `--fail-on`; 1 findings (or a
//! replay mismatch, a failing rule test); 2 usage or input error; 3 the cluster could not be reached.

mod analyze;
mod collect;
pub mod collect_refserver;
pub mod completions;
mod explain;
mod fleet;
mod import;
mod input;
mod kube_flags;
mod replay;
mod rules;
mod scan;
mod serve;
mod version;
mod why;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code: nothing at or above the threshold.
pub const EXIT_OK: u8 = 0;
/// Exit code: findings at or above the threshold, a replay mismatch, a failing rule test.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: usage or input error.
pub const EXIT_INPUT: u8 = 2;
/// Exit code: the cluster could not be reached at all.
pub const EXIT_UNREACHABLE: u8 = 3;

/// An error that carries its exit code. Anything else that reaches `main` is an input error (2).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// Exit code to use.
    pub code: u8,
    /// One-line message.
    pub message: String,
}

/// Bad input (a file, flag or argument): exit code 2 with this one-line message.
pub(crate) fn input_error(message: impl std::fmt::Display) -> anyhow::Error {
    CliError {
        code: EXIT_INPUT,
        message: message.to_string(),
    }
    .into()
}

/// The cluster could not be reached at all: exit code 3 with this one-line message.
pub(crate) fn unreachable_error(message: impl std::fmt::Display) -> anyhow::Error {
    CliError {
        code: EXIT_UNREACHABLE,
        message: message.to_string(),
    }
    .into()
}

/// kubectl extpath: which layer of the API server owns a failure on an extension path.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl extpath",
    bin_name = "kubectl extpath",
    version = crate::VERSION,
    about = "Tell which layer of the Kubernetes API server owns a failure on an extension path",
    long_about = None,
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Collect from the live cluster and classify every extension path (read-only).
    Scan(Box<scan::ScanArgs>),
    /// Validate an evidence bundle and print it back, or build one from raw incident files.
    Import(import::ImportArgs),
    /// Classify an evidence bundle offline: one verdict per subject.
    Analyze(analyze::AnalyzeArgs),
    /// The runbook text of a rule, or what a class owns.
    Explain(explain::ExplainArgs),
    /// List, lint and test rules.
    Rules(rules::RulesArgs),
    /// Collect an evidence bundle from the live cluster (read-only) and print it.
    Collect(Box<collect::CollectArgs>),
    /// Reproduce one request, trace its path rung by rung, and classify it (writes only as a
    /// server-side dry run: --dry-run -f FILE).
    Why(Box<why::WhyArgs>),
    /// Run scenarios on the bundled reference server end to end (`replay --all`), or serve one
    /// (`replay serve SCENARIO`, `replay serve --bundle FILE`).
    Replay(replay::ReplayArgs),
    /// Run as an exporter: scan every --interval and serve the last diagnosis over HTTP
    /// (/metrics for Prometheus, /diagnosis, /healthz, /readyz).
    Serve(Box<serve::ServeArgs>),
    /// Print shell completions (bash, zsh, fish) or the kubectl_complete-extpath shim.
    Completions(completions::CompletionsArgs),
    /// Print the client version, the rules it carries, and the API server's version when it can
    /// be reached.
    Version(Box<version::VersionArgs>),
    /// Answer cobra's completion protocol for kubectl_complete-extpath.
    #[command(name = "__complete", hide = true, disable_help_flag = true)]
    Complete(completions::CompleteArgs),
}

/// When this process started: JUnit's `time` is the run's time until rendering.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Standard output for a report, buffered: the standard library's stdout flushes at every
/// newline, so a pretty-printed JSON report of a large cluster (537,000 lines at 10,000
/// APIServices) cost one `write` system call per line — a third of a second of system time.
pub(crate) fn report_out() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock())
}

/// The start of the run (the first call, normally from [`main`]).
pub(crate) fn started() -> std::time::Instant {
    *STARTED.get_or_init(std::time::Instant::now)
}

/// Entry point used by `main`.
pub fn main() -> ExitCode {
    started();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::from(EXIT_OK);
            }
            let code = err
                .downcast_ref::<CliError>()
                .map(|e| e.code)
                .unwrap_or(EXIT_INPUT);
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Scan(args) => scan::run(*args),
        Command::Import(args) => import::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Rules(args) => rules::run(args),
        Command::Collect(args) => collect::run(*args),
        Command::Why(args) => why::run(*args),
        Command::Replay(args) => replay::run(args),
        Command::Serve(args) => serve::run(*args),
        Command::Completions(args) => completions::run(args),
        Command::Version(args) => version::run(*args),
        Command::Complete(args) => completions::run_complete(args),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Output format of documents (bundles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DocFormat {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}
