//! `-o yaml`: the [`Diagnosis`] as YAML (serde-saphyr), the same document as `-o json`.
//!
//! Same field order and content as the JSON output; only the syntax differs. Useful for reading a
//! diagnosis next to the YAML bundle it came from.

use std::io::Write;

use crate::engine::diagnosis::Diagnosis;

/// Render the YAML format.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(d: &Diagnosis, out: &mut dyn Write) -> std::io::Result<()> {
    let text = serde_saphyr::to_string(d).map_err(std::io::Error::other)?;
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}
