//! kubectl table output that carries a `STATUS REASON MESSAGE` row → a probe with that Status.
//!
//! `kubectl get -w` prints an error that ends a watch as a table row instead of on stderr (and may
//! still exit 0): `Failure  InternalError  an error on the server ("unable to decode an event from
//! the watch stream: stream error: stream ID 5; INTERNAL_ERROR; received from peer") has prevented
//! the request from succeeding`. The row is client-side (kubectl turned a stream error into a
//! Status), so the probe keeps the Status but no HTTP code; a watch-stream error marks the watch as
//! broken. Object rows above it are the list kubectl printed first and are not evidence.

use std::sync::LazyLock;

use regex::Regex;

use crate::bundle::probes::{ClientTool, WatchEnd, WatchOutcome};

use super::curl::client_probe;
use super::state::{FileCtx, FileError, Importer, PendingProbe, Yield};
use super::status_text::status_from_message;

static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^STATUS\s+REASON\s+MESSAGE\s*$").expect("static regex"));
static COLUMNS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s{2,}").expect("static regex"));

/// Whether any line is the Status table header (detection).
pub(crate) fn has_status_header(lines: &[&str]) -> bool {
    lines.iter().any(|l| HEADER.is_match(l.trim()))
}

/// Read the Status rows.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let mut in_status = false;
    let mut found = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if HEADER.is_match(t) {
            in_status = true;
            continue;
        }
        if !in_status || t.is_empty() {
            continue;
        }
        let cells: Vec<&str> = COLUMNS.splitn(t, 3).collect();
        let [status, reason, message] = cells.as_slice() else {
            return Err(FileError::at(
                i + 1,
                "Status row without STATUS, REASON and MESSAGE",
            ));
        };
        let mut body = status_from_message(Some(reason), message);
        body.status = (*status).to_string();
        // Client-side: kubectl built this Status, no server sent this code.
        body.code = None;
        let mut p = client_probe(ClientTool::Kubectl, file);
        if let Some(cause) = body.causes.first().map(|c| c.message.clone())
            && cause.contains("watch stream")
        {
            p.watch = Some(WatchOutcome {
                end: WatchEnd::Broken,
                end_detail: Some(cause),
                ..WatchOutcome::default()
            });
        }
        p.error = Some(message.to_string());
        p.status_body = Some(body);
        imp.probe(PendingProbe::new(p));
        found = true;
        in_status = false;
    }
    if !found {
        return Err(FileError::whole("Status table header without a Status row"));
    }
    Ok(Yield::Used)
}
