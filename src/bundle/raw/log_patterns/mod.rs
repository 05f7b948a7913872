//! The known error lines of control-plane logs: one table, one row per pattern.
//!
//! Each row has a stable kebab-case id (rules match on it, so ids are never reused), the component
//! the line proves when only one component writes it (`None` when several do: then the component
//! judged for the whole file is used), a cheap substring that must occur, and a regex whose named
//! groups become the finding's `fields`. Rows are tried in order; an `exclusive` row stops the
//! search, a non-exclusive one (a process exiting, say) lets a more specific row also match the
//! same line. Sources: REFERENCE §2 and the real logs in `fixtures/raw`.
//!
//! Field names that later map a finding to an object: `apiservice`, `webhook`, `uri`,
//! `namespace` + `service`, `gvk`.

use std::collections::BTreeMap;
use std::sync::{LazyLock, OnceLock};

use regex::Regex;

use crate::bundle::observations::Component;

use super::status_text::go_unquote;

/// One known log line.
pub(crate) struct LogPattern {
    /// Stable id, e.g. `webhook-failing-closed`.
    pub id: &'static str,
    /// The component a match proves, when only one writes it.
    pub component: Option<Component>,
    /// Substring that must occur (checked before the regex).
    pub needle: &'static str,
    /// Named groups become fields.
    pub regex: &'static str,
    /// Whether a match ends the search for this line.
    pub exclusive: bool,
}

const KAS: Option<Component> = Some(Component::KubeApiserver);
const EXT: Option<Component> = Some(Component::ExtensionApiserver);
const ETCD: Option<Component> = Some(Component::Etcd);
const ANY: Option<Component> = None;

const fn row(
    id: &'static str,
    component: Option<Component>,
    needle: &'static str,
    regex: &'static str,
) -> LogPattern {
    LogPattern {
        id,
        component,
        needle,
        regex,
        exclusive: true,
    }
}

/// The table. Order matters: specific rows before generic ones.
pub(crate) static PATTERNS: &[LogPattern] = &[
    // A process exiting on a fatal error; the error itself may match a row below too.
    LogPattern {
        exclusive: false,
        ..row(
            "server-command-failed",
            ANY,
            "\"command failed\"",
            r#""command failed" err="(?P<error>(?:[^"\\]|\\.)*)""#,
        )
    },
    // --- Aggregation (kube-aggregator inside kube-apiserver) ---
    row(
        "apiservice-availability-changed",
        KAS,
        "changing APIService availability",
        r#""changing APIService availability" name="(?P<apiservice>[^"]+)" oldStatus=(?P<old_status>\w+) newStatus=(?P<new_status>\w+)(?: message="(?P<condition_message>(?:[^"\\]|\\.)*)")? reason="(?P<reason>[^"]*)""#,
    ),
    row(
        "apiservice-check-failed",
        KAS,
        " failed with: ",
        r"^(?P<apiservice>[a-z0-9]+\.[a-z0-9.\-]*) failed with: (?P<error>.*)$",
    ),
    row(
        "openapi-aggregation-failed",
        KAS,
        "loading OpenAPI spec for",
        r#"loading OpenAPI spec for "(?P<apiservice>[^"]+)" failed with: (?P<error>.*)$"#,
    ),
    // handler_proxy.go logs this beside the 503 `service unavailable` when the Service has no
    // usable endpoint at request time (REFERENCE §2.2): the wiring broke, not the backend.
    row(
        "aggregator-error-resolving",
        KAS,
        "error resolving ",
        r"error resolving (?P<namespace>[a-z0-9\-]+)/(?P<service>[a-z0-9\-]+): (?P<error>.*)$",
    ),
    row(
        "reverse-proxy-body-copy-error",
        KAS,
        "ReverseProxy read error during body copy",
        r"ReverseProxy read error during body copy: (?P<error>.*)$",
    ),
    // --- Admission ---
    // The dispatchers log which way a failed call went: `failing open` is failurePolicy Ignore
    // (the request went on, `apiserver_admission_webhook_fail_open_count` rose), `failing closed`
    // is Fail (the request got `Internal error occurred`), REFERENCE §2.3.
    row(
        "webhook-failing-closed",
        KAS,
        "Failed calling webhook, failing closed",
        r"Failed calling webhook, failing closed (?P<webhook>[^:\s]+): (?P<error>.*)$",
    ),
    row(
        "webhook-failing-open",
        KAS,
        "Failed calling webhook, failing open",
        r"Failed calling webhook, failing open (?P<webhook>[^:\s]+): (?P<error>.*)$",
    ),
    row(
        "webhook-rejected",
        KAS,
        "rejected by webhook \"",
        r#"rejected by webhook "(?P<webhook>[^"]+)":(?:.*Code:(?P<code>\d+))?"#,
    ),
    row(
        "conversion-webhook-failed",
        KAS,
        "conversion webhook for ",
        r"conversion webhook for (?P<gvk>.+?) (?P<error>(?:failed|returned).*)$",
    ),
    // --- Auth, as extension API servers log it (delegated authn/authz) ---
    // The forbidden SubjectAccessReview comes before the generic authorizer failure with the same
    // needle: it names the extension server's own identity, whose RBAC is what to fix (DESIGN §1
    // rule 4), while the generic row may be a network error.
    row(
        "sar-forbidden",
        EXT,
        "Failed to make webhook authorizer request",
        r#"Failed to make webhook authorizer request: (?P<error>subjectaccessreviews\.authorization\.k8s\.io is forbidden: User "(?P<user>[^"]+)".*)$"#,
    ),
    row(
        "authorizer-request-failed",
        ANY,
        "Failed to make webhook authorizer request",
        r"Failed to make webhook authorizer request: (?P<error>.*)$",
    ),
    row(
        "tokenreview-forbidden",
        EXT,
        "tokenreviews.authentication.k8s.io is forbidden",
        r#"tokenreviews\.authentication\.k8s\.io is forbidden: User \\?"(?P<user>[^"\\]+)"#,
    ),
    // An extension server reads its client CA and requestheader settings from this kube-system
    // ConfigMap; unreadable, it cannot verify the aggregator's front-proxy certificate, so the
    // users the aggregator forwards in `X-Remote-User` are not authenticated.
    row(
        "auth-configmap-unreadable",
        EXT,
        "Unable to get configmap/extension-apiserver-authentication",
        r"Unable to get configmap/extension-apiserver-authentication in (?P<namespace>[a-z0-9\-]+)",
    ),
    row(
        "auth-reader-forbidden",
        EXT,
        "extension-apiserver-authentication",
        r#"configmaps \\?"extension-apiserver-authentication\\?" is forbidden: User \\?"(?P<user>[^"\\]+)\\?" cannot (?P<verb>\w+)"#,
    ),
    row(
        "authn-config-skipped",
        EXT,
        "Continuing without authentication configuration",
        r"(?P<warning>Continuing without authentication configuration)",
    ),
    // apiserver `request/x509/x509.go`: the front-proxy certificate verified, but its CN is not in
    // `--requestheader-allowed-names` (REFERENCE §2.3).
    row(
        "front-proxy-cn-not-allowed",
        EXT,
        "is not in the allowed list",
        r"x509: subject with cn=(?P<cn>\S+?) is not in the allowed list",
    ),
    row(
        "unauthenticated-request",
        ANY,
        "Unable to authenticate the request",
        r#"Unable to authenticate the request"?(?:\s*err="?\[?|: |\s*due to an error: )?(?P<error>[^"\]]*)"#,
    ),
    // --- Request handling (timeouts), written by any generic API server ---
    row(
        "request-timeout-or-abort",
        ANY,
        "timeout or abort while handling",
        r#"timeout or abort while handling: method=(?P<method>\S+) URI="(?P<uri>[^"]*)""#,
    ),
    row(
        "handler-timeout",
        ANY,
        "http: Handler timeout",
        r"(?P<error>http: Handler timeout)",
    ),
    row(
        "post-timeout-activity",
        ANY,
        "post-timeout activity",
        r#"post-timeout activity - time-elapsed: (?P<elapsed>[^,]+),(?: (?P<method>[A-Z]+) "(?P<uri>[^"]*)" result: (?P<result>.*)| panicked: \w+, err: (?P<error>[^,]*))?"#,
    ),
    // --- Storage (the etcd client inside an API server) ---
    // ANY: every generic API server embeds this client, extension servers with their own etcd
    // too, and whose etcd it is decides the verdict (an extension server's backend is out of
    // scope, DESIGN §1 rule 3) — so the component comes from the file, not the line.
    // `[-]etcd failed` is tried before the generic health row so the etcd reason is kept.
    row(
        "etcd-health-failed",
        ANY,
        "[-]etcd failed",
        r"\[-\]etcd failed: (?P<reason>.*)$",
    ),
    row(
        "health-check-failed",
        ANY,
        " check failed: ",
        r"^(?P<check>\S+) check failed: (?P<endpoint>readyz|livez|healthz)",
    ),
    row(
        "watch-chan-compacted",
        ANY,
        "required revision has been compacted",
        r"watch chan error: (?P<error>etcdserver: mvcc: required revision has been compacted)",
    ),
    row(
        "cacher-terminating-watchers",
        ANY,
        "Terminating all watchers from cacher",
        r"Terminating all watchers from cacher (?P<resource>\S+)",
    ),
    row(
        "etcd-no-server-preface",
        ANY,
        "didn't receive server preface in time",
        r"failed to connect to \{(?P<address>[^ }]+)[^}]*\}: (?P<error>didn't receive server preface in time)",
    ),
    row(
        "etcd-connect-failed",
        ANY,
        "addrConn.createTransport failed to connect to",
        r"failed to connect to \{(?P<address>[^ }]+)[^}]*\}[.:] (?:Err: )?(?P<error>.*)$",
    ),
    row(
        "etcd-client-retry",
        ANY,
        "retrying of unary invoker failed",
        r"retrying of unary invoker failed(?:: (?P<error>.*))?$",
    ),
    // --- etcd's own log ---
    // etcd warns about every request slower than `--warning-apply-duration` (100 ms by default),
    // with the time taken in the message; the rules judge `took` against a setting, not the
    // line's presence.
    row(
        "etcd-slow-request",
        ETCD,
        "took too long",
        r"(?P<what>apply request|read-only range request|request)\b.*?took too long(?: \((?P<took>[^)]+)\))?",
    ),
    row(
        "etcd-slow-fdatasync",
        ETCD,
        "slow fdatasync",
        r"(?P<event>slow fdatasync)",
    ),
    row(
        "etcd-heartbeat-late",
        ETCD,
        "failed to send out heartbeat on time",
        r"(?P<event>failed to send out heartbeat on time)",
    ),
    row(
        "etcd-overloaded",
        ETCD,
        "server is likely overloaded",
        r"(?P<event>server is likely overloaded)",
    ),
    row(
        "etcd-client-gone",
        ETCD,
        "processUnaryRPC failed to write status",
        r"processUnaryRPC failed to write status: (?P<error>.*)$",
    ),
    row(
        "etcd-leader-lost",
        ETCD,
        "lost leader",
        r"(?P<event>lost leader.*)$",
    ),
    // The catch-all for the rpctypes errors (REFERENCE §2.3), last among the storage rows so
    // that the more specific rows above keep their own ids.
    row(
        "etcd-request-error",
        ANY,
        "etcdserver: ",
        r#"(?P<error>etcdserver: [a-z][^"\\]*)"#,
    ),
    // --- Shutdown (any generic API server) ---
    row(
        "shutdown-initiated",
        ANY,
        "ShutdownInitiated",
        r#"name="(?P<event>ShutdownInitiated)""#,
    ),
    row(
        "stopped-listening",
        ANY,
        "Stopped listening on",
        r"Stopped listening on (?P<address>\S+)",
    ),
    row(
        "apiserver-exiting",
        ANY,
        "apiserver is exiting",
        r"\[graceful-termination\] (?P<event>apiserver is exiting)",
    ),
];

/// Each row's regex, compiled the first time its needle occurs (most rows never match a given
/// import, and compiling all of them up front costs more than matching a log).
static COMPILED: LazyLock<Vec<OnceLock<Regex>>> =
    LazyLock::new(|| PATTERNS.iter().map(|_| OnceLock::new()).collect());

fn compiled(i: usize) -> &'static Regex {
    COMPILED[i].get_or_init(|| {
        Regex::new(PATTERNS[i].regex).expect("log pattern regexes are static and tested")
    })
}

/// Every pattern a message matches (usually one), with the fields it extracted.
pub(crate) fn match_message(message: &str) -> Vec<(&'static LogPattern, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for (i, p) in PATTERNS.iter().enumerate() {
        if !message.contains(p.needle) {
            continue;
        }
        let re = compiled(i);
        let Some(c) = re.captures(message) else {
            continue;
        };
        let mut fields = BTreeMap::new();
        for name in re.capture_names().flatten() {
            if let Some(m) = c.name(name) {
                let v = m.as_str().trim();
                if !v.is_empty() {
                    let v = if v.contains("\\\"") {
                        go_unquote(v)
                    } else {
                        v.to_string()
                    };
                    fields.insert(name.to_string(), v);
                }
            }
        }
        out.push((p, fields));
        if p.exclusive {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests;
