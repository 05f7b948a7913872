//! kubectl's stderr when a command failed → one probe per error line.
//!
//! The lines kubectl prints: `Error from server (Reason): message (get flunders.wardle.example.com)`,
//! `error: failed to create configmap: Internal error occurred: failed calling webhook …`,
//! `Unable to connect to the server: …`, `error: unable to retrieve the complete list of server
//! APIs: <gv>: …` (with the `memcache.go` klog lines that precede it), and the capture's `exit=N`.
//! Each error line becomes a probe: the Status kubectl shows (its code from the reason, or from
//! client-go's generic wording), kubectl's description of the request, the method and path when the
//! error quotes a URL, the error text and the exit code.

use std::sync::LazyLock;

use regex::Regex;

use crate::bundle::Probe;
use crate::bundle::probes::ClientTool;

use super::curl::client_probe;
use super::log_lines::parse_log_line;
use super::state::{FileCtx, FileError, Importer, PendingProbe, Yield};
use super::status_text::{
    INVALID, forbidden_user, generic_reason, parse_error_from_server, split_description,
    status_from_message,
};
use super::trailer::{Trailer, parse_trailer};

/// klog sources of kubectl's own client-side warnings.
const CLIENT_KLOG_SOURCES: &[&str] = &["memcache.go", "request.go", "cached_discovery.go"];

/// Whether a line is something kubectl prints on stderr (detection).
pub(crate) fn is_stderr_line(line: &str) -> bool {
    let t = line.trim();
    if t.starts_with("Error from server")
        || t.starts_with("error: ")
        || t.starts_with("Unable to connect to the server: ")
        || t.starts_with("Warning: ")
        || t.starts_with("couldn't get resource list for ")
        || (t.starts_with("The connection to the server ") && t.contains(" was refused"))
        || matches!(parse_trailer(t), Some(Trailer::Exit { .. }))
    {
        return true;
    }
    parse_log_line(t).is_some_and(|l| {
        l.source
            .as_deref()
            .is_some_and(|s| CLIENT_KLOG_SOURCES.iter().any(|c| s.starts_with(c)))
    })
}

/// Read kubectl stderr.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let mut exit: Option<(i32, Option<f64>)> = None;
    let mut probes: Vec<Probe> = Vec::new();
    let mut memcache: Vec<Probe> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("Warning: ") {
            continue;
        }
        if let Some(Trailer::Exit { code, seconds }) = parse_trailer(t) {
            exit = Some((code, seconds));
            continue;
        }
        if let Some(l) = parse_log_line(t) {
            if let Some(gv_err) = discovery_failure_in(&l.message) {
                memcache.extend(discovery_probes(file, gv_err));
            }
            continue;
        }
        probes.extend(probes_from_error_line(file, t));
    }
    // The klog `couldn't get resource list` lines repeat what the final `unable to retrieve the
    // complete list of server APIs` line says; they stand in for it only when it is missing.
    let has_discovery_error = probes
        .iter()
        .any(|p| p.description.as_deref() == Some(API_RESOURCES));
    if !has_discovery_error {
        probes.extend(memcache);
    }
    if probes.is_empty() {
        return Ok(Yield::Nothing(match exit {
            Some((code, _)) => {
                format!("kubectl stderr with no error line (exit={code}): no request is named")
            }
            None => "kubectl stderr with no error line".into(),
        }));
    }
    for mut p in probes {
        if let Some((code, seconds)) = exit {
            p.exit_code = Some(code);
            p.latency_ms = p.latency_ms.or(seconds.map(|s| s * 1000.0));
        }
        imp.probe(PendingProbe::new(p));
    }
    Ok(Yield::Used)
}

const API_RESOURCES: &str = "api-resources";

static URL_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(Get|Post|Put|Patch|Delete|Head) "https?://[^/"]+(/[^"]*)": (.*)$"#)
        .expect("static regex")
});
static FAILED_TO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^failed to [a-z]+(?: [a-z0-9.\-/]+)?(?: [a-z0-9.\-]+)?: ").expect("static regex")
});
static LOGGED_IN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^You must be logged in to the server(?: \((.*)\))?$").expect("static regex")
});

/// Probes for one line of kubectl error output (also used for error text captured elsewhere).
pub(crate) fn probes_from_error_line(file: &FileCtx, line: &str) -> Vec<Probe> {
    let t = line.trim();
    if let Some((status, description)) = parse_error_from_server(t) {
        let mut p = client_probe(ClientTool::Kubectl, file);
        p.status = status.code;
        p.user = forbidden_user(&status);
        p.description = description;
        p.error = Some(t.to_string());
        p.status_body = Some(status);
        return vec![p];
    }
    let rest = if let Some(r) = t.strip_prefix("error: ") {
        r
    } else if let Some(r) = t.strip_prefix("Unable to connect to the server: ") {
        let mut p = client_probe(ClientTool::Kubectl, file);
        p.error = Some(t.to_string());
        url_error(&mut p, r);
        return vec![p];
    } else if t.starts_with("The connection to the server ") {
        // kubectl's words when the TCP connection was refused (`The connection to the server
        // host:port was refused - did you specify the right host or port?`): nothing answered, so
        // there is no status and no path.
        let mut p = client_probe(ClientTool::Kubectl, file);
        p.error = Some(t.to_string());
        return vec![p];
    } else {
        return Vec::new();
    };
    // client-go's `ErrGroupDiscoveryFailed` joins one `<group/version>: <error>` per failed group;
    // each is a failed discovery GET of its own (usually one APIService each).
    if let Some(gv_err) = rest.strip_prefix("unable to retrieve the complete list of server APIs: ")
    {
        return discovery_probes(file, gv_err)
            .into_iter()
            .map(|mut p| {
                p.description = Some(API_RESOURCES.into());
                p.error = Some(t.to_string());
                p
            })
            .collect();
    }
    let mut p = client_probe(ClientTool::Kubectl, file);
    p.error = Some(t.to_string());
    // `error: failed to create configmap: <what the server or transport said>`.
    let inner = FAILED_TO.find(rest).map_or(rest, |m| &rest[m.end()..]);
    if let Some(c) = LOGGED_IN.captures(inner) {
        let mut status = status_from_message(Some("Unauthorized"), inner);
        status.message = c.get(1).map_or(inner, |m| m.as_str()).to_string();
        p.status = status.code;
        p.status_body = Some(status);
    } else if url_error(&mut p, inner) {
        // A transport error: no response arrived.
    } else {
        let (message, description) = split_description(inner);
        p.description = description;
        // A Status message kubectl printed bare: keep it as a Status when its wording is one the
        // API conventions fix (client-go's renderings, a webhook's denial), else only as error text.
        if generic_reason(message).is_some()
            || message.starts_with("admission webhook \"")
            || INVALID.is_match(message)
        {
            let status = status_from_message(None, message);
            p.status = status.code;
            p.status_body = Some(status);
        }
    }
    vec![p]
}

/// `Post "https://host/path": cause` → method and path; true when the text had that form.
fn url_error(p: &mut Probe, text: &str) -> bool {
    match URL_ERROR.captures(text) {
        Some(c) => {
            p.method = Some(c[1].to_ascii_uppercase());
            p.path = Some(c[2].to_string());
            true
        }
        None => false,
    }
}

fn discovery_failure_in(message: &str) -> Option<&str> {
    let start =
        message.find("couldn't get resource list for ")? + "couldn't get resource list for ".len();
    Some(message[start..].trim_end_matches('"'))
}

/// `wardle.example.com/v1alpha1: the server is currently unable to handle the request[, …]`
/// → one probe per group/version.
fn discovery_probes(file: &FileCtx, text: &str) -> Vec<Probe> {
    split_group_versions(text)
        .into_iter()
        .map(|(gv, err)| {
            let mut p = client_probe(ClientTool::Kubectl, file);
            p.method = Some("GET".into());
            p.path = Some(if gv.contains('/') {
                format!("/apis/{gv}")
            } else {
                format!("/api/{gv}")
            });
            p.error = Some(format!("{gv}: {err}"));
            if generic_reason(err).is_some() {
                let status = status_from_message(None, err);
                p.status = status.code;
                p.status_body = Some(status);
            }
            p
        })
        .collect()
}

// `ErrGroupDiscoveryFailed` joins failures as `<gv>: <err>, <gv>: <err>`; a group/version is
// `group/vN…` or a bare core `vN`.
static GV_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|, )([a-z0-9][a-z0-9.\-]*/v[0-9][a-z0-9]*|v[0-9][a-z0-9]*): ")
        .expect("static regex")
});

pub(crate) fn split_group_versions(text: &str) -> Vec<(&str, &str)> {
    let starts: Vec<(usize, usize, &str)> = GV_PREFIX
        .captures_iter(text)
        .filter_map(|c| {
            let whole = c.get(0)?;
            let gv = c.get(1)?;
            Some((whole.start(), whole.end(), gv.as_str()))
        })
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, (_, end, gv))| {
            let stop = starts.get(i + 1).map_or(text.len(), |n| n.0);
            (*gv, text[*end..stop].trim())
        })
        .collect()
}
