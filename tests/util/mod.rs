//! The shared test kit: helpers only, no tests. One file per concern:
//! * [`refserver`] — starting the reference server on a scenario;
//! * [`binary`] — running the real binary in a clean temporary HOME;
//! * [`bundle`] — reading gaps out of a collected bundle;
//! * [`rbac`] — the shipped least-privilege ClusterRole;
//! * [`daemons`] — real etcd and Prometheus processes;
//! * [`hostile_server`] — an API server that misbehaves on purpose;
//! * [`captures`] — the real captures of `fixtures/raw/` as cases, and their scoring;
//! * [`report_cases`] — hand-built diagnoses for the renderer tests;
//! * [`random_exposition`] — random valid Prometheus expositions for the parser's property tests.

#![allow(dead_code)]

pub(crate) mod binary;
pub(crate) mod bundle;
pub(crate) mod captures;
pub(crate) mod daemons;
pub(crate) mod hostile_server;
pub(crate) mod random_exposition;
pub(crate) mod rbac;
pub(crate) mod refserver;
pub(crate) mod report_cases;

use std::path::PathBuf;

pub(crate) use binary::{Files, Run, extpath_run, run};
pub(crate) use bundle::{gaps, gaps_beyond_etcd};
pub(crate) use rbac::shipped_cluster_role;
pub(crate) use refserver::{start, start_text};

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
