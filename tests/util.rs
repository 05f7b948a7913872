//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `assert_cmd` command for the built binary.
pub fn extpath() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("kubectl-extpath").expect("binary is built");
    c.env("NO_COLOR", "1");
    c
}
