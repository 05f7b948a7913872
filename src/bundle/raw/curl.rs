//! curl output → probes: `-i`/`-D` headers, `-v` traces, bodies, `-w` status lines, curl errors.
//!
//! A capture may hold the whole exchange in one file or split it (headers, body and `-w` status
//! line in three files). A file holding only one part is marked with its [`CurlPart`] so that parts
//! of one request can be joined by file stem — the only use of a file name in the importer, and only
//! as a fallback: unpaired parts stay separate probes and each still says what it shows.
//!
//! Bodies are read for what they are: a `Status` (with causes), a discovery document (which names
//! the group/version it describes, and is only ever served with 200), `/version`, or one of the
//! plain-text bodies the aggregator and the generic API server write (`service unavailable`,
//! `error trying to reach service: …`, `Too many requests, please try again later.`). Request
//! headers are never kept, so an `Authorization:` line of a `-v` trace cannot leak into the bundle.

use serde_json::Value;

use crate::bundle::probes::{ClientTool, ProbeKind, ResponseHeaders};
use crate::bundle::{Probe, ProbeOrigin, ServerVersion};

use super::state::{CurlPart, FileCtx, FileError, Importer, PendingProbe, Yield, truncate};
use super::status_text::{forbidden_user, status_from_value};
use super::timeline::{Stamp, parse_http_date};
use super::trailer::{Trailer, curl_exit_meaning, split_trailer};

/// Plain-text response bodies of the aggregator and the generic API server (REFERENCE §2.2–2.3).
pub(crate) const KNOWN_PLAIN_BODIES: &[&str] = &[
    "service unavailable",
    "error trying to reach service: ",
    "Too many requests, please try again later.",
    "Internal Server Error: ",
    "missing user",
    "The apiserver is shutting down, please try again later.",
    "404 page not found",
];

/// An empty client-output probe of `tool`, read from `file`.
pub(crate) fn client_probe(tool: ClientTool, file: &FileCtx) -> Probe {
    Probe::new(ProbeOrigin {
        kind: ProbeKind::ClientOutput,
        tool,
        files: vec![file.shown.clone()],
    })
}

/// Whether a status line starts a curl response (`HTTP/2 503`, `< HTTP/1.1 200 OK`).
pub(crate) fn is_status_line(line: &str) -> bool {
    let l = line.trim_start_matches("< ");
    l.starts_with("HTTP/")
        && l.split_whitespace()
            .nth(1)
            .is_some_and(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
}

/// Headers (and maybe a body) as curl `-i`, `-D` or `-v` wrote them.
pub(crate) fn read_response(
    imp: &mut Importer,
    file: &FileCtx,
    text: &str,
) -> Result<Yield, FileError> {
    let mut probe = client_probe(ClientTool::Curl, file);
    let lines: Vec<&str> = text.lines().collect();
    let (trailer_start, trailers) = split_trailer(&lines);
    let mut dial = DialNotes::default();
    let mut at = None;
    let mut body_lines: Vec<&str> = Vec::new();
    let mut in_headers = false;
    let mut saw_headers = false;
    for line in &lines[..trailer_start] {
        // `curl -v`: `> ` request lines, `< ` response lines (a bare `<`/`>` ends a header block),
        // `* ` connection notes, `{ [`/`} [` data markers.
        if *line == ">" || line.starts_with("> ") {
            request_line(&mut probe, line.trim_start_matches('>').trim_start());
            continue;
        }
        if line.starts_with("* ") {
            dial.note(line);
            continue;
        }
        // Data markers; the `< ` header lines are read below.
        if line.starts_with("{ [") || line.starts_with("} [") {
            continue;
        }
        let verbose = *line == "<" || line.starts_with("< ");
        let l = if verbose {
            line[1..].trim_start()
        } else {
            line
        };
        let l = l.trim_end_matches('\r');
        if is_status_line(l) {
            // A later status line (after `100 Continue` or a redirect) replaces the earlier one.
            probe.status = l.split_whitespace().nth(1).and_then(|c| c.parse().ok());
            probe.headers = ResponseHeaders::default();
            in_headers = true;
            saw_headers = true;
            body_lines.clear();
            continue;
        }
        if in_headers {
            if l.trim().is_empty() {
                in_headers = false;
                continue;
            }
            if let Some(stamp) = header(&mut probe.headers, l) {
                at = Some(stamp);
            }
            continue;
        }
        if !verbose {
            body_lines.push(line);
        }
    }
    if !saw_headers {
        return Err(FileError::at(1, "curl output without an HTTP status line"));
    }
    probe.address = dial.address;
    // `curl -v` (or `-i`) of a watch: the headers, then the stream's events. The events are the
    // evidence (an in-stream 410 `Expired` after a 200, how the stream ended), so the body is read
    // as a stream, with the status and path the headers and request lines gave.
    let mut events = body_lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .peekable();
    if events.peek().is_some() && events.all(|l| super::watch_stream::is_event_line(l)) {
        let read = super::watch_stream::read_events(&body_lines, 1, &trailers)?;
        apply_trailers(&mut probe, &trailers);
        super::watch_stream::attach(imp, probe, read, at);
        return Ok(Yield::Used);
    }
    let body = body_lines.join("\n");
    let has_body = !body.trim().is_empty();
    if has_body {
        read_body(imp, &mut probe, body.trim())?;
    }
    apply_trailers(&mut probe, &trailers);
    let mut pending = PendingProbe::new(probe);
    pending.at = at;
    // Headers alone (`curl -D file`) are half a response; marked so that `finish` can join the
    // body written by the same command to another file of the same stem.
    if !has_body && trailers.is_empty() {
        pending.curl_part = Some((CurlPart::Headers, file.dir.clone(), file.stem.clone()));
    }
    imp.probe(pending);
    Ok(Yield::Used)
}

/// A body and/or `-w` status line and curl's error and exit lines, without headers.
pub(crate) fn read_output(
    imp: &mut Importer,
    file: &FileCtx,
    text: &str,
) -> Result<Yield, FileError> {
    let lines: Vec<&str> = text.lines().collect();
    let (trailer_start, trailers) = split_trailer(&lines);
    // `curl -v` of a request that got no response: connection notes (`* `), maybe the request
    // (`> `) and TLS notes, and no body. They are not a body: they say whom curl dialled and why
    // it got no answer.
    let verbose = lines[..trailer_start]
        .iter()
        .any(|l| DialNotes::is_dial_note(l));
    let mut dial = DialNotes::default();
    let mut request: Option<&str> = None;
    let body_lines: Vec<&str> = if verbose {
        lines[..trailer_start]
            .iter()
            .copied()
            .filter(|l| {
                if l.starts_with("* ") {
                    dial.note(l);
                    return false;
                }
                if l.starts_with("> ") {
                    request.get_or_insert(l.trim_start_matches('>').trim_start());
                    return false;
                }
                !is_verbose_line(l)
            })
            .collect()
    } else {
        lines[..trailer_start].to_vec()
    };
    let body = body_lines.join("\n");
    // Only curl writes `-w` lines and `curl:` errors; a bare body may come from any client.
    let by_curl = verbose || trailers.iter().any(|t| !matches!(t, Trailer::Exit { .. }));
    let tool = if by_curl {
        ClientTool::Curl
    } else {
        ClientTool::Other
    };
    let mut probe = client_probe(tool, file);
    if let Some(req) = request {
        request_line(&mut probe, req);
    }
    let has_body = !body.trim().is_empty();
    if has_body {
        read_body(imp, &mut probe, body.trim())?;
    }
    apply_trailers(&mut probe, &trailers);
    probe.address = dial.address;
    // curl's own error line says `Couldn't connect to server`; its note says why (`Connection
    // refused`, `No route to host`), which is what tells a stopped backend from a filtered port.
    if let Some(why) = dial.failure {
        probe.error = Some(match probe.error.take() {
            Some(e) if !e.contains(&why) => format!("{e} ({why})"),
            Some(e) => e,
            None => why,
        });
    }
    let only_status_line =
        !has_body && trailers.len() == 1 && matches!(trailers[0], Trailer::HttpStatus { .. });
    let mut pending = PendingProbe::new(probe);
    if only_status_line {
        pending.curl_part = Some((CurlPart::StatusLine, file.dir.clone(), file.stem.clone()));
    } else if has_body && trailers.is_empty() {
        pending.curl_part = Some((CurlPart::Body, file.dir.clone(), file.stem.clone()));
    }
    imp.probe(pending);
    Ok(Yield::Used)
}

/// A line only `curl -v` writes around a body: its notes (`* `), the request it sent (`> `, a
/// lone `>`), the response headers it shows (`< `, a lone `<`), and its data markers (`{ [5 bytes
/// data]`, `} [512 bytes data]` — with the bracket: a pretty-printed JSON body's `{ "kind"…` is
/// body).
pub(crate) fn is_verbose_line(line: &str) -> bool {
    line.starts_with("* ")
        || line.starts_with("> ")
        || line.starts_with("< ")
        || line == ">"
        || line == "<"
        || line.starts_with("{ [")
        || line.starts_with("} [")
}

/// What curl's `-v` connection notes say about the dial: the address (`host:port`) and why it
/// failed, when it did.
#[derive(Debug, Default)]
struct DialNotes {
    address: Option<String>,
    /// Whether `address` came from a note naming the URL's host (`Connected to`, `Failed to
    /// connect to`, `connect to … failed`), which `Trying <ip>:<port>` does not replace.
    named: bool,
    failure: Option<String>,
}

impl DialNotes {
    /// A note only curl `-v` writes about a connection.
    fn is_dial_note(line: &str) -> bool {
        let Some(note) = line.strip_prefix("* ") else {
            return false;
        };
        let note = note.trim_start();
        note.starts_with("Trying ")
            || note.starts_with("Connected to ")
            || note.starts_with("connect to ")
            || note.starts_with("Failed to connect to ")
    }

    fn note(&mut self, line: &str) {
        let note = line.trim_start_matches('*').trim();
        // `Trying 127.0.0.1:9443...` (the address as dialled, IPv6 in brackets).
        if let Some(rest) = note.strip_prefix("Trying ") {
            if self.address.is_none() {
                let addr = rest.trim_end_matches('.').trim();
                if !addr.is_empty() {
                    self.address = Some(addr.to_string());
                }
            }
            return;
        }
        // `Connected to hook.ns.svc (10.0.0.5) port 443 (#0)`.
        if let Some(rest) = note.strip_prefix("Connected to ") {
            let host = rest.split_whitespace().next().unwrap_or_default();
            if let Some(port) = port_after(rest) {
                self.name(host, port);
            }
            return;
        }
        // `connect to 127.0.0.1 port 9443 from 127.0.0.1 port 51000 failed: Connection refused`
        // (newer curl), `Failed to connect to 127.0.0.1 port 9443 after 0 ms: Connection refused`
        // (older curl says the reason there; newer says `Couldn't connect to server`).
        let (rest, failed) = if let Some(r) = note.strip_prefix("Failed to connect to ") {
            (r, note)
        } else if let Some(r) = note.strip_prefix("connect to ") {
            (r, note)
        } else {
            return;
        };
        let host = rest.split_whitespace().next().unwrap_or_default();
        if let Some(port) = port_after(rest) {
            self.name(host, port);
        }
        if let Some((_, why)) = failed.rsplit_once(": ")
            && why != "Couldn't connect to server"
            && self.failure.is_none()
        {
            self.failure = Some(failed.to_string());
        }
    }

    fn name(&mut self, host: &str, port: &str) {
        if !self.named && !host.is_empty() {
            self.address = Some(format!("{host}:{port}"));
            self.named = true;
        }
    }
}

/// The number after the first ` port ` of a curl note.
fn port_after(note: &str) -> Option<&str> {
    let rest = note.split(" port ").nth(1)?;
    let port = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    (!port.is_empty()).then_some(port)
}

fn request_line(probe: &mut Probe, req: &str) {
    // `> Host: 10.244.1.7:8443`: where the request went, when curl's own notes did not say.
    if let Some(host) = req
        .strip_prefix("Host:")
        .or_else(|| req.strip_prefix("host:"))
    {
        let host = host.trim();
        if probe.address.is_none() && !host.is_empty() {
            probe.address = Some(host.to_string());
        }
        return;
    }
    let mut parts = req.split_whitespace();
    if let (Some(method), Some(path)) = (parts.next(), parts.next())
        && probe.method.is_none()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && path.starts_with('/')
    {
        probe.method = Some(method.to_string());
        probe.path = Some(path.to_string());
    }
}

/// Record a response header that matters; returns the time of a `Date` header.
pub(crate) fn header(h: &mut ResponseHeaders, line: &str) -> Option<Stamp> {
    let (name, value) = line.split_once(':')?;
    let value = value.trim().to_string();
    match name.trim().to_ascii_lowercase().as_str() {
        // Only headers a rule reads. The two PF UIDs are set on every response that went through
        // APF (flowcontrol/v1 types.go, REFERENCE §2.3) and name the FlowSchema and priority level
        // that judged the request — the link from a 429 to the object to fix.
        "retry-after" => h.retry_after = Some(value),
        "x-kubernetes-pf-flowschema-uid" => h.flow_schema_uid = Some(value),
        "x-kubernetes-pf-prioritylevel-uid" => h.priority_level_uid = Some(value),
        "audit-id" => h.audit_id = Some(value),
        "content-type" => h.content_type = Some(value),
        // The server's Date is the only clock a capture carries for its response: it places the
        // probe on the timeline next to logs and events.
        "date" => {
            let stamp = parse_http_date(&value).map(Stamp::Full);
            h.date = Some(value);
            return stamp;
        }
        _ => {}
    }
    None
}

/// Read a response body into the probe.
pub(crate) fn read_body(
    imp: &mut Importer,
    probe: &mut Probe,
    body: &str,
) -> Result<(), FileError> {
    if !body.starts_with('{') {
        // The generic API server's 500 names the request: `Internal Server Error: "<URI>": <err>`.
        if let Some(rest) = body.strip_prefix("Internal Server Error: \"")
            && let Some((uri, _)) = rest.split_once('"')
            && uri.starts_with('/')
        {
            probe.path.get_or_insert_with(|| uri.to_string());
        }
        probe.body = Some(truncate(body, 2048));
        return Ok(());
    }
    let v: Value = serde_json::from_str(body).map_err(|e| {
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or_default();
        FileError::whole(format!(
            "malformed JSON response body (line {} of the body): {msg}",
            e.line()
        ))
    })?;
    // A Status body is the API server's own account of a failure (reason, causes); its code is
    // used only when no status line was captured, since a proxied body may be a backend's.
    if let Some(status) = status_from_value(&v) {
        probe.user = forbidden_user(&status);
        if probe.status.is_none() {
            probe.status = status.code;
        }
        probe.status_body = Some(status);
        return Ok(());
    }
    let str_at = |k: &str| v.get(k).and_then(Value::as_str);
    match str_at("kind") {
        Some("APIResourceList") => {
            // Core `v1` has no slash and lives under `/api`; every named group is under `/apis`.
            let gv = str_at("groupVersion").unwrap_or_default();
            discovery(
                probe,
                if gv.contains('/') {
                    format!("/apis/{gv}")
                } else {
                    format!("/api/{gv}")
                },
            );
        }
        Some("APIGroupList") => discovery(probe, "/apis".into()),
        Some("APIGroup") => discovery(
            probe,
            format!("/apis/{}", str_at("name").unwrap_or_default()),
        ),
        Some("APIVersions") => discovery(probe, "/api".into()),
        _ => {
            // etcd's own `/health` answer (`{"health":"true"}`), kept for assembly to read as
            // etcd's health check (`finish::etcd_health`).
            if str_at("health").is_some() {
                probe.body = Some(truncate(body, 2048));
                return Ok(());
            }
            // `/version` has no `kind`; gitVersion with major is its shape (apimachinery
            // `version.Info`), and the first one seen names the server for version-aware rules.
            if let (Some(git), Some(major)) = (str_at("gitVersion"), str_at("major")) {
                imp.bundle
                    .collection
                    .server_version
                    .get_or_insert(ServerVersion {
                        git_version: git.to_string(),
                        major: major.to_string(),
                        minor: str_at("minor").unwrap_or_default().to_string(),
                    });
                discovery(probe, "/version".into());
            }
        }
    }
    Ok(())
}

/// A discovery document names the request it answers, and is served only with 200.
fn discovery(probe: &mut Probe, path: String) {
    probe.method.get_or_insert_with(|| "GET".into());
    probe.path.get_or_insert(path);
    probe.status.get_or_insert(200);
}

/// Apply `-w` status lines, curl errors and exit lines.
pub(crate) fn apply_trailers(probe: &mut Probe, trailers: &[Trailer]) {
    for t in trailers {
        match t {
            Trailer::HttpStatus { code, seconds } => {
                // curl reports 000 when no response arrived.
                if *code != 0 {
                    probe.status = Some(*code);
                }
                if let Some(s) = seconds {
                    probe.latency_ms = Some(s * 1000.0);
                }
            }
            Trailer::CurlError { code, message } => {
                probe.error = Some(format!("curl: ({code}) {message}"));
                probe.exit_code = Some(*code);
            }
            Trailer::CurlExit { code, seconds } | Trailer::Exit { code, seconds } => {
                probe.exit_code = Some(*code);
                if *code != 0 && probe.error.is_none() {
                    probe.error = Some(match curl_exit_meaning(*code) {
                        Some(m) => format!("curl exit {code}: {m}"),
                        None => format!("exit {code}"),
                    });
                }
                if probe.latency_ms.is_none()
                    && let Some(s) = seconds
                {
                    probe.latency_ms = Some(s * 1000.0);
                }
            }
        }
    }
}
