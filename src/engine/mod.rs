//! The rule engine: (bundle, rules) → verdicts. Synchronous and pure: no I/O beyond reading rule
//! files, no network, no clock (time checks use the bundle's collection time).
//!
//! * [`diagnosis`] — the output contract (`Diagnosis`, `Verdict`, `Class`, `Severity`, `Subject`).
//! * [`waivers`] — waivers files for CI gates, and the `--fail-on` gate.

pub mod diagnosis;
pub mod waivers;

pub use diagnosis::*;
