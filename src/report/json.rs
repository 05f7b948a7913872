//! `-o json`: the [`Diagnosis`] as pretty JSON, exactly the contract in `docs/diagnosis.schema.json`.
//!
//! Fields come out in the order the types declare them (serde's derive order) and maps are sorted,
//! so the same diagnosis always gives the same bytes — CI can diff runs. Nothing is added or
//! dropped here; a consumer that wants less uses `jq`.

use std::io::Write;

use crate::engine::diagnosis::Diagnosis;

/// Render the JSON format (pretty, with a trailing newline).
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, d).map_err(std::io::Error::other)?;
    writeln!(out)
}
