//! `kubectl-extpath`: parse the command line, run it, map the outcome to an exit code.
//!
//! All of it is [`extpath::cli::main`], which prints an error once, with its whole context chain,
//! and maps the outcome to the process exit code (DESIGN §4: 0 clean, 1 findings, 2 input error,
//! 3 unreachable).

fn main() -> std::process::ExitCode {
    extpath::cli::main()
}
