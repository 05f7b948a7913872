//! The shared test kit: helpers only, no tests. One file per concern:
//! * [`refserver`] — starting the reference server on a scenario;
//! * [`binary`] — running the real binary in a clean temporary HOME;
//! * [`bundle`] — reading gaps out of a collected bundle;
//! * [`rbac`] — the shipped least-privilege ClusterRole;
//! * [`daemons`] — real etcd and Prometheus processes;
//! * [`k8s`] — real kube-apiservers (1.24, 1.36) with etcd, the sample-apiserver and the test's
//!   own webhook backends (`EXTPATH_K8S_ASSETS`);
//! * [`hostile_server`] — an API server that misbehaves on purpose;
//! * [`captures`] — the real captures of `fixtures/raw/` as cases, and their scoring;
//! * [`report_cases`] — hand-built diagnoses for the renderer tests;
//! * [`random_exposition`] — random valid Prometheus expositions for the parser's property tests.

// Each test module uses a different subset of the kit, and all of them are one binary; without
// this every helper one module does not call would warn in the others' view.
#![allow(dead_code)]

pub(crate) mod binary;
pub(crate) mod bundle;
pub(crate) mod captures;
pub(crate) mod daemons;
pub(crate) mod hostile_server;
pub(crate) mod k8s;
pub(crate) mod random_exposition;
pub(crate) mod raw_files;
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
    // Snapshots must not depend on the developer's terminal: NO_COLOR turns `--color auto` off
    // even where a test's stdout happens to be a tty (no-color.org).
    c.env("NO_COLOR", "1");
    c
}
