//! The rule engine: (bundle, rules) → verdicts. Synchronous and pure: no I/O beyond reading rule
//! files, no network, no clock (time checks use the bundle's collection time).
//!
//! * [`diagnosis`] — the output contract (`Diagnosis`, `Verdict`, `Class`, `Severity`, `Subject`).

pub mod diagnosis;

pub use diagnosis::*;
