//! extpath: which layer of the Kubernetes API server owns a failure on an extension path.
//!
//! The pipeline, and the direction the modules depend on each other:
//!
//! ```text
//! cli ──► collect ──► bundle ◄── engine ◄── report
//!   └──► refserver ──► pki, promtext (leaves)
//! ```
//!
//! * [`bundle`] is the evidence model (`EvidenceBundle`), its loader and the raw-file importer.
//!   It is the only input of the engine.
//! * [`promtext`] is the streaming Prometheus text parser shared by import, collection and tests.
//! * [`pki`] decodes and verifies certificates and generates test PKI; it knows nothing of bundles.
//! * [`exporter`] is `serve`'s schedule, state and HTTP surface (`/metrics` written with
//!   [`promtext`]'s writer).
//! * [`report`] renders a `Diagnosis` as a table, JSON, YAML, Markdown or JUnit XML.
//! * [`cli`] is the clap surface: one file per subcommand, no domain logic.
//! * [`semantics`] holds the Kubernetes and Go rules both sides apply, written once (x509 host
//!   names, label selectors); it depends on nothing else in the crate.
//! * [`fuzzing`] holds the bodies of the fuzz targets in `fuzz/`, one per untrusted-input entry point.
//!
//! The reference server never imports the engine: a server that knew the verdicts would make every
//! replay test circular.

pub mod bundle;
pub mod cli;
pub mod collect;
pub mod engine;
pub mod exporter;
pub mod fuzzing;
pub mod pki;
pub mod promtext;
pub mod refserver;
pub mod report;
pub mod semantics;

/// The version of this build, as `--version` prints it and every bundle records it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
