//! Warning Events that report a failed API request → observations of that request.
//!
//! Controllers tell about the requests that fail them in Events: a ReplicaSet that cannot create
//! Pods records `FailedCreate: Error creating: Internal error occurred: failed calling webhook "…":
//! … connection refused`; the namespace controller records `Discovery failed for some groups, 1
//! failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server
//! is currently unable to handle the request`; an operator whose CRD is gone records `failed to list
//! *v1.CronTab: the server could not find the requested resource (get crontabs.stable.example.com)`.
//! These are client errors as client-go renders them, so they are read like kubectl's stderr: the
//! error starts at the first wording the API conventions fix (client-go's generic messages,
//! `Internal error occurred: `, a webhook's denial, a discovery failure, a conversion failure), and
//! its status, kubectl-style request description and group/versions come from there. An Event
//! without such an error (a failed scheduling, a probe failure) is not a request and gives nothing.

use crate::bundle::observations::Event;
use crate::bundle::probes::{ClientTool, ProbeKind};
use crate::bundle::{Probe, ProbeOrigin};

use super::status_text::{
    GENERIC_MESSAGES, generic_reason, split_description, status_from_message,
};

/// Where a request error starts inside a longer message, besides client-go's generic messages.
const ERROR_STARTS: &[&str] = &[
    "Internal error occurred: ",
    "admission webhook \"",
    "conversion webhook for ",
];
const DISCOVERY: &str = "unable to retrieve the complete list of server APIs: ";

fn probe(e: &Event) -> Probe {
    let mut p = Probe::new(ProbeOrigin {
        kind: ProbeKind::ClientOutput,
        tool: ClientTool::Controller,
        files: Vec::new(),
    });
    // The event recorder folds repeats of one message into `count`, so an Event is as many
    // failed attempts as it counts; a missing count (events.k8s.io without a series) is one.
    p.attempts = u32::try_from(e.count.max(1)).unwrap_or(u32::MAX);
    p.at = e.last_seen;
    p.error = Some(e.message.clone());
    p
}

/// The observations a Warning Event reports: one request, one per group/version of a discovery
/// failure, or none when its message is not a request error.
pub fn probes_from_event(e: &Event) -> Vec<Probe> {
    // Controllers record failed API calls as Warnings; a Normal event never reports one.
    if e.type_ != "Warning" {
        return Vec::new();
    }
    let message = e.message.trim();
    // client-go's ErrGroupDiscoveryFailed lists every failing group/version in one message
    // (REFERENCE §2.3); each is its own failed request, usually of a different APIService.
    if let Some(i) = message.find(DISCOVERY) {
        return super::kubectl_stderr::split_group_versions(&message[i + DISCOVERY.len()..])
            .into_iter()
            .map(|(gv, err)| {
                let mut p = probe(e);
                p.method = Some("GET".into());
                p.path = Some(if gv.contains('/') {
                    format!("/apis/{gv}")
                } else {
                    format!("/api/{gv}")
                });
                if generic_reason(err).is_some() {
                    let status = status_from_message(None, err);
                    p.status = status.code;
                    p.status_body = Some(status);
                }
                p
            })
            .collect();
    }
    let start = GENERIC_MESSAGES
        .iter()
        .map(|(prefix, _, _)| *prefix)
        .chain(ERROR_STARTS.iter().copied())
        .filter_map(|needle| message.find(needle))
        // The earliest start wins: controllers prefix their own context (`Error creating: `),
        // and a wrapped error may quote a second known wording further in.
        .min();
    let Some(start) = start else {
        return Vec::new();
    };
    let (inner, description) = split_description(&message[start..]);
    let mut p = probe(e);
    p.description = description;
    if generic_reason(inner).is_some() || inner.starts_with("admission webhook \"") {
        let status = status_from_message(None, inner);
        p.status = status.code;
        p.status_body = Some(status);
    }
    vec![p]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{Kind, ObjectRef};

    fn event(reason: &str, message: &str) -> Event {
        Event {
            involved: ObjectRef::namespaced(Kind::Deployment, "cron", "cron-controller"),
            type_: "Warning".into(),
            reason: reason.into(),
            message: message.into(),
            count: 7,
            last_seen: None,
        }
    }

    #[test]
    fn a_not_found_list_is_a_404_of_the_described_request() {
        let p = probes_from_event(&event(
            "FailedList",
            "failed to list *v1.CronTab: the server could not find the requested resource (get crontabs.stable.example.com)",
        ));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].status, Some(404));
        assert_eq!(
            p[0].description.as_deref(),
            Some("get crontabs.stable.example.com")
        );
        assert_eq!(p[0].attempts, 7);
        assert_eq!(p[0].origin.tool, ClientTool::Controller);
    }

    #[test]
    fn a_replicaset_blocked_by_a_webhook_is_a_500_naming_it() {
        let p = probes_from_event(&event(
            "FailedCreate",
            "Error creating: Internal error occurred: failed calling webhook \"policy.example.com\": failed to call webhook: Post \"https://policy.webhooks.svc:443/validate?timeout=5s\": dial tcp 10.96.0.12:443: connect: connection refused",
        ));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].status, Some(500));
        assert!(
            p[0].error
                .as_deref()
                .unwrap()
                .contains("failed calling webhook \"policy.example.com\"")
        );
    }

    #[test]
    fn a_discovery_failure_is_one_request_per_group_version() {
        let p = probes_from_event(&event(
            "NamespaceDeletionDiscoveryFailure",
            "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request",
        ));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].path.as_deref(), Some("/apis/metrics.k8s.io/v1beta1"));
        assert_eq!(p[0].status, Some(503));
    }

    #[test]
    fn events_that_are_not_request_errors_give_nothing() {
        assert!(
            probes_from_event(&event(
                "FailedScheduling",
                "0/3 nodes are available: 3 Insufficient cpu."
            ))
            .is_empty()
        );
        let mut normal = event(
            "FailedList",
            "the server could not find the requested resource",
        );
        normal.type_ = "Normal".into();
        assert!(probes_from_event(&normal).is_empty());
    }
}
