//! Content → kind. Never the file name.
//!
//! Detection looks at what a file says, in an order that puts the most specific signals first: the
//! Prometheus exposition format, APF dump headers, logs whose messages span lines (`Trace[…]`
//! blocks, the `[-]…` checks under a klog `healthz.go` line — never health output or JSON), health
//! listings, JSON documents (objects, API responses, watch events, structured log lines), YAML
//! objects, PEM armour, HTTP status lines, kubectl trace markers, Status tables, result lists,
//! kubectl's stderr vocabulary, curl trailers and known response bodies, log headers, and openssl
//! output. Anything else is of no known kind; the caller turns that into a `skipped` gap (inside a
//! directory) or an error (a file named on the command line), using the reason given here.
//!
//! Classes of mis-detection this order prevents, each with a test below: a klog log whose lines
//! start with `[` (continuations) taken for health output or a JSON array; a log of `Trace[…]`
//! blocks (most lines without a header) taken for nothing; a Kubernetes object holding PEM
//! (a ConfigMap's `client-ca-file`, `kubectl get cm -A -o json`) taken for a PEM file; a log line
//! quoting `-----BEGIN` taken for PEM. PEM is a file whose armour starts a line, outside any
//! Kubernetes document.

use serde_json::Value;

use super::curl::{KNOWN_PLAIN_BODIES, is_status_line};
use super::kube_objects::is_leading_noise;
use super::log_lines::{count_log_lines, is_json_log_line, parse_log_line};
use super::trailer::{Trailer, split_trailer};
use super::{
    apf_dump, health, kubectl_stderr, kubectl_trace, pem, result_list, status_table, watch_stream,
};

/// The kinds of file the importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Kubernetes objects (`kubectl get -o json|yaml`).
    KubeObjects,
    /// A JSON API response (Status, discovery document, `/version`), maybe with curl trailers.
    ApiResponse,
    /// A watch stream (JSON event lines).
    WatchStream,
    /// Prometheus text exposition.
    Metrics,
    /// PEM blocks.
    Pem,
    /// openssl's text output about certificates.
    OpensslText,
    /// A kubectl `-v6`… trace.
    KubectlTrace,
    /// kubectl stderr.
    KubectlStderr,
    /// curl headers (`-i`, `-D`, `-v`), maybe with a body.
    CurlResponse,
    /// curl body and/or `-w` status line, curl errors.
    CurlOutput,
    /// One line per attempt of a repeated request.
    ResultList,
    /// readyz/livez/healthz, etcd health.
    Health,
    /// APF debug dumps.
    ApfDump,
    /// kubectl table output with a Status row.
    StatusTable,
    /// A log excerpt.
    Log,
}

/// What detection concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Detected {
    Known(Kind),
    /// Of no known kind, and why (a short phrase).
    Unknown(String),
}

/// Whether the start of a file is Prometheus text (decided on a prefix so a dump can be streamed).
pub(crate) fn is_metrics(head: &str) -> bool {
    let lines: Vec<&str> = head
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(20)
        .collect();
    let Some(first) = lines.first() else {
        return false;
    };
    if first.starts_with("# HELP ") || first.starts_with("# TYPE ") {
        return true;
    }
    // A dump without HELP/TYPE lines: every sample line is `name{labels} value [timestamp]`.
    let complete = if head.ends_with('\n') {
        lines.len()
    } else {
        lines.len().saturating_sub(1)
    };
    complete > 0 && lines[..complete].iter().all(|l| is_sample_line(l))
}

fn is_sample_line(l: &str) -> bool {
    let name_end = l.find(['{', ' ']).unwrap_or(l.len());
    let name = &l[..name_end];
    let valid_name = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':');
    if !valid_name {
        return false;
    }
    let rest = match l[name_end..].strip_prefix('{') {
        Some(r) => match r.rfind('}') {
            Some(i) => &r[i + 1..],
            None => return false,
        },
        None => &l[name_end..],
    };
    let mut parts = rest.split_whitespace();
    let value_ok = parts
        .next()
        .is_some_and(|v| crate::promtext::model::parse_value(v).is_some());
    let ts_ok = parts.next().is_none_or(|t| t.parse::<i64>().is_ok());
    value_ok && ts_ok && parts.next().is_none()
}

/// Decide the kind of a whole (non-metrics) text.
pub(crate) fn detect(text: &str) -> Detected {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let Some(&first) = lines.first() else {
        return Detected::Unknown("only whitespace".into());
    };
    use Kind::*;
    let known = Detected::Known;
    if is_metrics(text) {
        return known(Metrics);
    }
    if apf_dump::is_header(first) {
        return known(ApfDump);
    }
    let (log_headers, continuations) = count_log_lines(&lines);
    let kubectl_trace = || {
        lines.iter().any(|l| {
            parse_log_line(l).is_some_and(|p| {
                kubectl_trace::is_trace_marker(p.source.as_deref().unwrap_or_default(), &p.message)
            })
        })
    };
    // A log with multi-line messages: its `[-]…` and `Trace[…]` lines are the log's own.
    if continuations > 0
        && (log_headers > 0 || continuations == lines.len())
        && (log_headers + continuations) * 2 >= lines.len()
        && !kubectl_trace()
    {
        return known(Log);
    }
    if health::looks_like(&lines) {
        return known(Health);
    }
    if let Some(kind) = json_kind(&lines, text) {
        return kind;
    }
    let yaml_object = |l: &&str| l.starts_with("apiVersion:") || l.starts_with("kind:");
    if yaml_object(&first) || (first == "---" && lines.iter().any(yaml_object)) {
        return known(KubeObjects);
    }
    if lines
        .iter()
        .any(|l| l.trim_start().starts_with("-----BEGIN "))
    {
        return known(Pem);
    }
    if first == "---" {
        return known(KubeObjects);
    }
    if is_status_line(first) || (first.starts_with("* ") && lines.iter().any(|l| is_status_line(l)))
    {
        return known(CurlResponse);
    }
    if kubectl_trace() {
        return known(KubectlTrace);
    }
    if status_table::has_status_header(&lines) {
        return known(StatusTable);
    }
    if result_list::looks_like(&lines) {
        return known(ResultList);
    }
    if lines.iter().all(|l| kubectl_stderr::is_stderr_line(l)) {
        return known(KubectlStderr);
    }
    if is_curl_output(&lines) {
        return known(CurlOutput);
    }
    if log_headers > 0 && (log_headers + continuations) * 2 >= lines.len() {
        return known(Log);
    }
    if pem::is_openssl_output(&lines) {
        return known(OpensslText);
    }
    if is_table_header(first) {
        return Detected::Unknown(
            "kubectl table output without a Status row (it carries nothing extpath reads; use -o json)"
                .into(),
        );
    }
    Detected::Unknown(format!(
        "unrecognised content, first line {:?}",
        shorten(first)
    ))
}

/// JSON at the start (after kubectl's stderr noise): objects, responses, watch events, JSON logs.
fn json_kind(lines: &[&str], text: &str) -> Option<Detected> {
    let first = lines.iter().find(|l| !is_leading_noise(l))?.trim_start();
    if !starts_like_json(first) {
        return None;
    }
    if is_json_log_line(first) {
        return Some(Detected::Known(Kind::Log));
    }
    if watch_stream::is_event_line(first) {
        return Some(Detected::Known(Kind::WatchStream));
    }
    let start = text.find(first).unwrap_or(0);
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let v = match stream.next() {
        Some(Ok(v)) => v,
        // Malformed JSON: a known kind whose reader reports the line.
        _ => return Some(Detected::Known(Kind::KubeObjects)),
    };
    let obj = match &v {
        Value::Object(o) => o,
        _ => {
            return Some(Detected::Unknown(
                "a JSON document that is not an object".into(),
            ));
        }
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let response = super::status_text::status_from_value(&v).is_some()
        || matches!(
            kind,
            "APIResourceList" | "APIGroupList" | "APIGroup" | "APIVersions"
        )
        || (obj.contains_key("gitVersion") && obj.contains_key("major"));
    if response {
        return Some(Detected::Known(Kind::ApiResponse));
    }
    if obj.contains_key("health") {
        return Some(Detected::Known(Kind::Health));
    }
    if !kind.is_empty() && (obj.contains_key("apiVersion") || obj.contains_key("items")) {
        return Some(Detected::Known(Kind::KubeObjects));
    }
    Some(Detected::Unknown(
        "a JSON document that is not a Kubernetes object or API response".into(),
    ))
}

/// Whether a line opens a JSON object or array: `{` then a key or `}`, `[` then a value or `]`.
/// `[-]etcd failed: …`, `[+]ping ok` and `[graceful-termination] …` open no JSON.
fn starts_like_json(line: &str) -> bool {
    let mut chars = line.chars();
    let open = chars.next();
    let rest = chars.as_str().trim_start();
    let next = rest.chars().next();
    match open {
        Some('{') => matches!(next, None | Some('"' | '}')),
        Some('[') => match next {
            None | Some('{' | '[' | '"' | ']' | '0'..='9' | 't' | 'f' | 'n') => true,
            Some('-') => rest[1..].starts_with(|c: char| c.is_ascii_digit()),
            _ => false,
        },
        _ => false,
    }
}

/// curl's `-w` line, its error and exit lines, and known plain-text bodies. `curl -v` notes of a
/// request that got no response (`* ` connection and TLS notes, `> ` request lines, `{ [5 bytes
/// data]`) are not body: a TLS handshake alone writes some forty of them before a timeout.
fn is_curl_output(lines: &[&str]) -> bool {
    let (start, trailers) = split_trailer(lines);
    let curl_trailer = trailers.iter().any(|t| !matches!(t, Trailer::Exit { .. }));
    let body: Vec<&str> = lines[..start]
        .iter()
        .copied()
        .filter(|l| !super::curl::is_verbose_line(l))
        .collect();
    let known_body = !body.is_empty()
        && body.len() <= 4
        && KNOWN_PLAIN_BODIES
            .iter()
            .any(|p| body[0].trim_start().starts_with(p));
    let only_exit_lines = trailers.iter().all(|t| matches!(t, Trailer::Exit { .. }));
    (curl_trailer && body.len() <= 20) || (known_body && only_exit_lines)
}

fn is_table_header(line: &str) -> bool {
    let cols: Vec<&str> = line
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    cols.len() >= 2
        && cols.iter().all(|c| {
            c.chars()
                .all(|ch| ch.is_ascii_uppercase() || matches!(ch, '-' | '(' | ')' | ' ' | '_'))
        })
}

fn shorten(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= 60 {
        return s.to_string();
    }
    let cut: String = s.chars().take(60).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_from_content() {
        let k = |t: &str| detect(t);
        assert_eq!(
            k("# HELP a b\n# TYPE a counter\na 1\n"),
            Detected::Known(Kind::Metrics)
        );
        assert_eq!(
            k("HTTP 503 time_total=0.005309\n"),
            Detected::Known(Kind::CurlOutput)
        );
        assert_eq!(
            k("service unavailable\n"),
            Detected::Known(Kind::CurlOutput)
        );
        assert_eq!(k("429 0.33\n200 2.1\n"), Detected::Known(Kind::ResultList));
        assert_eq!(k("exit=0\n"), Detected::Known(Kind::KubectlStderr));
        assert_eq!(
            k("[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"),
            Detected::Known(Kind::Health)
        );
        assert_eq!(
            k("HTTP/2 200 \ndate: x\n\n"),
            Detected::Known(Kind::CurlResponse)
        );
        assert_eq!(
            k("{\"kind\":\"List\",\"apiVersion\":\"v1\",\"items\":[]}"),
            Detected::Known(Kind::KubeObjects)
        );
        assert!(matches!(k("hello world\n"), Detected::Unknown(_)));
        assert!(matches!(
            k("NAME   SERVICE   AVAILABLE   AGE\nv1.   Local   True   1m\n"),
            Detected::Unknown(r) if r.contains("table")
        ));
    }

    /// A klog log is a log even when some of its lines start with `[`: the `[-]…` checks klog
    /// prints under `healthz.go] … check failed`, also at the top of an excerpt (cut after the
    /// header) and when many checks failed at once (more items than headers).
    #[test]
    fn klog_continuation_lines_keep_a_log_a_log() {
        let cut = "[-]etcd failed: error getting data from etcd: context deadline exceeded\n\
I1129 08:55:52.429173   32417 healthz.go:257] etcd check failed: livez\n\
[-]etcd failed: error getting data from etcd: context deadline exceeded\n";
        assert_eq!(detect(cut), Detected::Known(Kind::Log));
        let startup = "I1129 08:30:01.000000   32417 healthz.go:257] poststarthook/a,poststarthook/b,poststarthook/c,poststarthook/d,autoregister-completion check failed: readyz\n\
[-]poststarthook/a failed: not finished\n[-]poststarthook/b failed: not finished\n\
[-]poststarthook/c failed: not finished\n[-]poststarthook/d failed: not finished\n\
[-]autoregister-completion failed: missing APIService: [v1.]\n";
        assert_eq!(detect(startup), Detected::Known(Kind::Log));
        // A listing on its own (no header above its items) is still health output.
        assert_eq!(
            detect("[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"),
            Detected::Known(Kind::Health)
        );
    }

    /// A log made mostly of `Trace[…]` blocks (their step lines carry no header) is a log.
    #[test]
    fn trace_blocks_keep_a_log_a_log() {
        let text = "I1129 08:56:05.515496   32417 trace.go:205] Trace[1933546506]: \"List etcd3\" key:/configmaps/x,resourceVersion:,resourceVersionMatch:,limit:500,continue: (29-Nov-2026 08:55:55.515) (total time: 9999ms):\n\
Trace[1933546506]: ---\"About to write a response\" 3ms (08:56:05.515)\n\
Trace[1933546506]: ---\"Writing http response done\" 1ms (08:56:05.516)\n\
Trace[1933546506]: [9.999913784s] [9.999913784s] END\n";
        assert_eq!(detect(text), Detected::Known(Kind::Log));
        assert_eq!(
            detect("Trace[1]: [1.5s] [1.5s] END\n"),
            Detected::Known(Kind::Log)
        );
    }

    /// A Kubernetes object holding PEM (a ConfigMap's CA bundles, `kubectl get cm -A -o json`) is
    /// an object, not a PEM file; PEM armour quoted inside a log line is not PEM either.
    #[test]
    fn pem_inside_objects_and_logs_is_not_a_pem_file() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let yaml = format!(
            "apiVersion: v1\ndata:\n  client-ca-file: |\n{}kind: ConfigMap\nmetadata:\n  name: x\n",
            pem.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        );
        assert_eq!(detect(&yaml), Detected::Known(Kind::KubeObjects));
        let json = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"ca.crt": pem}}
        ]});
        let json = serde_json::to_string_pretty(&json).unwrap();
        assert_eq!(detect(&json), Detected::Known(Kind::KubeObjects));
        assert_eq!(
            detect(
                "I1129 08:00:00.000000   1 x.go:1] loaded -----BEGIN CERTIFICATE----- from file\n"
            ),
            Detected::Known(Kind::Log)
        );
        assert_eq!(detect(pem), Detected::Known(Kind::Pem));
        assert_eq!(
            detect(&format!(
                "CONNECTED(00000003)\n---\nCertificate chain\n{pem}"
            )),
            Detected::Known(Kind::Pem)
        );
    }

    #[test]
    fn json_starts_only_where_json_can_start() {
        for yes in [
            "{",
            "{\"kind\": 1}",
            "{}",
            "[",
            "[{",
            "[\"a\"]",
            "[]",
            "[1]",
            "[-1]",
            "[true]",
        ] {
            assert!(starts_like_json(yes), "{yes}");
        }
        for no in [
            "[-]etcd failed: x",
            "[+]ping ok",
            "[graceful-termination] x",
            "[core] x",
            "{x",
        ] {
            assert!(!starts_like_json(no), "{no}");
        }
    }
}
