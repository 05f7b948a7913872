//! The CLI contract as reviewed transcripts (trycmd): `tests/cmd/*.toml` hold a command line, its
//! exit code and what it prints — the errors people meet (a directory for a FILE, an unknown rule
//! id, a waiver naming one), `-` for stdin, `-o wide`, kubectl-style `--subject` kinds, `version`,
//! `rules test`/`rules lint` for rule authors, and value completion.
//! `TRYCMD=overwrite cargo test --test main transcripts` rewrites them after a deliberate change.

#[test]
fn cli_transcripts() {
    trycmd::TestCases::new()
        .register_bin(
            "kubectl-extpath",
            std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-extpath")),
        )
        .env("NO_COLOR", "1")
        .case("tests/cmd/*.toml");
}
