//! `explain RULE|CLASS`: the runbook text of a rule, or what a class owns and which rules diagnose it.

use std::io::Write;

use clap::Args;

use super::EXIT_OK;
use super::analyze::RuleArgs;
use crate::engine::Class;

/// Arguments of `explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A rule id (`aggregation-service-missing`) or a class (`Aggregation`, `APF`, …).
    #[arg(value_name = "RULE|CLASS")]
    topic: String,
    #[command(flatten)]
    rule_args: RuleArgs,
}

/// What a class owns, in a few words (completion and `--help` show it beside the name).
pub fn class_help(c: Class) -> &'static str {
    match c {
        Class::Aggregation => "APIService, Service, endpoints, proxy TLS, discovery",
        Class::Admission => "admission and CRD conversion webhooks",
        Class::Auth => "authentication and authorization, delegated too",
        Class::Apf => "API Priority and Fairness, max-in-flight",
        Class::Storage => "storage and etcd",
        Class::Watch => "watch streams and the watch cache",
        Class::OutOfScope => "not the API server's: controllers, kubelet, backends",
        Class::Healthy => "nothing wrong on the subject",
        Class::Inconclusive => "the evidence to judge the subject is missing",
    }
}

/// What a class owns (docs/diagnosis.md).
///
/// The boundaries follow where the API server's code puts the failure, not what the client sees,
/// since clients see the same words for several layers (DESIGN §1 rule 8).
pub fn class_text(c: Class) -> &'static str {
    match c {
        Class::Aggregation => {
            "APIService registration, Service/EndpointSlice resolution, proxy TLS to the extension server, discovery of the group/version, extension server availability. Evidence: APIService Available=False with its reason, x509 errors on proxied requests, aggregator_unavailable_apiservice."
        }
        Class::Admission => {
            "Mutating and validating admission webhooks and CRD conversion webhooks. Evidence: the webhook configuration (timeoutSeconds, failurePolicy, target), apiserver_admission_webhook_* metrics, conversion webhook latency and errors, \"failed calling webhook\"."
        }
        // A 401/403 from the extension server is still Auth (DESIGN §1 rule 4): on an aggregated
        // group it usually means the server rejected the front-proxy identity.
        Class::Auth => {
            "Authentication (401) and authorization (403) in kube-apiserver and in the extension server: front-proxy trust, delegated authn/authz, RBAC for SubjectAccessReview/TokenReview. Evidence: 401/403 statuses, requestheader settings, the extension-apiserver-authentication ConfigMap, client certificate expiry."
        }
        // Max-in-flight belongs here too: with APF off it answers the same 429 and the same
        // `Too many requests, please try again later.` (`maxinflight.go` shares the text with
        // `priority-and-fairness.go`, REFERENCE §2.3).
        Class::Apf => {
            "API Priority and Fairness and max-in-flight. Evidence: 429 with Retry-After and the X-Kubernetes-PF-* headers, apiserver_flowcontrol_rejected_requests_total, queue wait, FlowSchema/PriorityLevel state."
        }
        Class::Storage => {
            "storage.Interface and etcd for built-in objects and custom resources. Evidence: etcd_request_duration_seconds, etcd's own fsync/commit/leader metrics, readyz etcd check, 500/504 with etcd errors."
        }
        // Stale controllers are checked here first (DESIGN §1 rule 6): if watches are healthy,
        // the controller's own logic is out of scope.
        Class::Watch => {
            "Watch streams and the watch cache. Evidence: 410 Gone (too old resource version), apiserver_terminated_watchers_total, broken or silent streams, stale controllers."
        }
        Class::OutOfScope => {
            "Explicitly not this tool's: controller reconcile logic, kubelet/runtime/CNI, the extension server's own backend, a route that does not exist. The verdict says where to look next."
        }
        Class::Healthy => "Nothing wrong on that subject: the checks that passed are listed.",
        Class::Inconclusive => {
            "The evidence needed to judge the subject is missing: the gap says what could not be collected or was not supplied, and why."
        }
    }
}

pub fn run(args: ExplainArgs) -> anyhow::Result<u8> {
    let set = args.rule_args.load()?;
    let mut out = std::io::stdout().lock();
    // Rule ids are `area-symptom`, always with a hyphen (STYLE.md), and no class name has one,
    // so the order of these two lookups never hides one behind the other.
    if let Some(r) = set.get(&args.topic) {
        writeln!(out, "{}", r.id)?;
        writeln!(
            out,
            "class {}, severity {}, subject {}, rung {}, role {}, confidence {}",
            r.class,
            r.severity,
            r.subject_text(),
            r.rung,
            r.role.as_str(),
            r.confidence
        )?;
        writeln!(out, "\nsummary: {}", r.summary.source)?;
        writeln!(out, "\n{}", r.explain)?;
        if !r.rules_out.is_empty() {
            writeln!(out, "\nrules out:")?;
            for x in &r.rules_out {
                writeln!(out, "  {}: {}", x.class, x.because.source)?;
            }
        }
        if !r.next.is_empty() {
            writeln!(out, "\nnext:")?;
            for n in &r.next {
                writeln!(out, "  {}", n.source)?;
            }
        }
        if !r.references.is_empty() {
            writeln!(out, "\nreferences:")?;
            for x in &r.references {
                writeln!(out, "  {x}")?;
            }
        }
        writeln!(out, "\nsource: {}", r.file)?;
        return Ok(EXIT_OK);
    }
    if let Some(c) = Class::parse(&args.topic) {
        writeln!(out, "{c}\n\n{}", class_text(c))?;
        let rules: Vec<_> = set.rules.iter().filter(|r| r.class == c).collect();
        if !rules.is_empty() {
            writeln!(out, "\nrules:")?;
            for r in rules {
                writeln!(out, "  {:<52} {} ({})", r.id, r.subject_text(), r.severity)?;
            }
        }
        return Ok(EXIT_OK);
    }
    Err(super::input_error(format!(
        "{:?} is neither a rule id nor a class (classes: {})",
        args.topic,
        Class::ALL.map(|c| c.as_str()).join(", ")
    )))
}
