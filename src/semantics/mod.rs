//! Kubernetes and Go rules that both sides of the project apply, written once.
//!
//! The collector and the engine judge a cluster by the API server's rules, and the reference server
//! enforces the same rules so that a failure happens for real. A rule that is a pure function of
//! its inputs, fully specified by one Go function, lives here once and both sides call it:
//!
//! * [`x509_host`] — Go's `crypto/x509` host name matching (`VerifyHostname`), used by `pki`'s
//!   chain verification (live handshakes, the reference server's clients), by the raw importer's
//!   choice of which supplied leaf serves which object and by the engine's TLS facts;
//! * [`label_selector`] — apimachinery's label selector requirements and their text form, used by
//!   the bundle's `LabelSelector`, the reference server's webhook selectors, its ClusterRole
//!   aggregation and its list filter;
//! * [`go_duration`] — Go's `time.ParseDuration`, used by the reference server's `?timeout=` and
//!   the raw importer's trace lines;
//! * [`kind_resource`] — apimachinery's `UnsafeGuessKindToResource`, used by `why`'s planning of a
//!   write and by the raw importer's reading of a write's error;
//! * [`query_bool`] — apimachinery's boolean query parameter (`?watch=`), used by `why`'s
//!   [`Target`](crate::collect::why::target::Target) and the reference server's `RequestInfo`.
//!
//! Rules that model *how the API server dispatches* a request — which FlowSchema classifies it
//! (`refserver/apf.rs` vs `collect/why/flow_match.rs`) and which webhook rules cover it
//! (`refserver/admission.rs` vs `collect/why/webhook_match.rs`) — stay written twice on purpose:
//! the reference server is the oracle the diagnosis is tested against, and one shared model would
//! make a wrong model agree with itself. Those pairs, and the shared rules too, are held to tables
//! of cases whose answers come from the Kubernetes docs and Go source (`tests/semantics/*.yaml`,
//! run by `tests/semantics.rs`), so a drift on either side fails a test.
//!
//! This module depends on nothing else in the crate.

pub mod go_duration;
pub mod kind_resource;
pub mod label_selector;
pub mod query_bool;
pub mod x509_host;
