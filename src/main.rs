//! `kubectl-extpath`: parse the command line, run it, map the outcome to an exit code.
//!
//! Errors are printed once, with their whole context chain, by [`extpath::cli::run`]; `main` only turns
//! the result into a process exit code (DESIGN §4: 0 clean, 1 findings, 2 input error, 3 unreachable).

fn main() -> std::process::ExitCode {
    extpath::cli::main()
}
