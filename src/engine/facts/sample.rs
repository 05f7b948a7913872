//! The fully populated sample of the fact model (`sample.yaml`), used when rules are loaded: every
//! rule is evaluated against the facts built from it, and its field references are checked against
//! their shape, so a misspelt field or function is a load error with file and line.
//!
//! The sample is a bundle, not hand-written facts, so that it cannot drift from what the builders
//! produce: the facts a rule is checked against are built by the same code as in a real analysis.

use crate::bundle::{EvidenceBundle, load_bundle_str};

/// The sample bundle's YAML.
pub const SAMPLE_YAML: &str = include_str!("sample.yaml");

/// The sample bundle.
///
/// # Panics
/// Never in a released build: the sample is checked by a unit test.
pub fn sample_bundle() -> EvidenceBundle {
    load_bundle_str(SAMPLE_YAML, "<fact-model sample>")
        .unwrap_or_else(|e| panic!("the built-in fact-model sample is invalid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_loads() {
        let b = sample_bundle();
        assert!(!b.probes.is_empty() && !b.webhooks.is_empty());
    }
}
