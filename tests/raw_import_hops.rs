//! Timed hops: kube-apiserver's `Trace[…]` blocks and etcd's `took too long` warnings read from raw
//! logs, attributed to the webhook or the storage they timed, and the latent faults they show — a
//! slow fail-open webhook (Admission warning), etcd slow while healthy (Storage warning). An
//! extension API server's storage, and a request to an aggregated API, are never kube-apiserver's
//! storage. No input, however cut or garbled, makes the import panic.

use std::path::Path;

use extpath::bundle::Kind;
use extpath::bundle::raw::{ImportOptions, import_paths_with};
use extpath::bundle::{EvidenceBundle, HopLayer, TimedCall};
use extpath::engine::{Filter, RuleSet, Settings, analyze};
use proptest::prelude::*;
use serde_json::Value;

use crate::util::repo;

fn import(dir: &Path) -> EvidenceBundle {
    import_paths_with(
        &[dir.to_path_buf()],
        "2030-01-01T00:00:00Z".parse().unwrap(),
        ImportOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn diagnose(b: &EvidenceBundle) -> Value {
    serde_json::to_value(analyze(
        b,
        &RuleSet::bundled(),
        &Settings::default(),
        &Filter::default(),
    ))
    .unwrap()
}

fn verdict<'d>(doc: &'d Value, kind: &str, name: &str) -> &'d Value {
    doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["subject"]["kind"] == kind && v["subject"]["name"] == name)
        .unwrap_or_else(|| panic!("a verdict on {kind}/{name}: {doc:#}"))
}

#[test]
fn a_slow_fail_open_webhook_is_an_admission_warning_naming_its_times_and_timeout() {
    let b = import(&repo().join("fixtures/incidents/webhook-slow-fail-open"));
    let calls: Vec<TimedCall<'_>> = b.timed_hops.iter().flat_map(|h| h.calls()).collect();
    assert_eq!(
        calls.len(),
        6,
        "one call per create; the Create traces are no calls"
    );
    assert!(calls.iter().all(|c| {
        c.layer() == HopLayer::Admission
            && c.target().is_some_and(|t| {
                t.kind == Kind::ValidatingWebhook && t.name == "slow.policy.example.com"
            })
    }));
    let doc = diagnose(&b);
    let v = verdict(&doc, "ValidatingWebhook", "slow.policy.example.com");
    assert_eq!(v["class"], "Admission");
    assert_eq!(v["severity"], "warning");
    let summary = v["summary"].as_str().unwrap();
    for needle in [
        "slow.policy.example.com",
        "answers slowly",
        "up to 8.01 s",
        "timeoutSeconds 10",
        "failurePolicy Ignore hides its failures, not its latency",
    ] {
        assert!(summary.contains(needle), "{needle:?} in {summary}");
    }
    assert!(!summary.contains("times out"), "{summary}");
    // The Create traces' "Object stored in database" (8 s) is the handler's view, not storage.
    assert!(
        doc["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["class"] != "Storage"),
        "{doc:#}"
    );
}

#[test]
fn calls_that_reach_timeout_seconds_time_out() {
    let b = extpath::bundle::load_bundle(&repo().join("fixtures/bundles/adm-webhook-traced.yaml"))
        .unwrap();
    let doc = diagnose(&b);
    let v = verdict(&doc, "ValidatingWebhook", "timing-out.webhook.example.com");
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.contains("times out"), "{summary}");
    assert!(summary.contains("timeoutSeconds 5"), "{summary}");
    assert!(!summary.contains("near"), "{summary}");
    let v = verdict(&doc, "MutatingWebhook", "stepped.webhook.example.com");
    assert_eq!(v["class"], "Admission");
}

#[test]
fn etcd_slow_while_healthy_is_a_storage_warning_and_never_critical() {
    let b = import(&repo().join("fixtures/incidents/etcd-slow-healthy"));
    let storage: Vec<&str> = b
        .timed_hops
        .iter()
        .flat_map(|h| h.calls())
        .filter(TimedCall::is_apiserver_storage)
        .map(|c| c.name())
        .collect();
    assert_eq!(storage, ["List etcd3", "GuaranteedUpdate etcd3"]);
    let etcd: Vec<TimedCall<'_>> = b
        .timed_hops
        .iter()
        .flat_map(|h| h.calls())
        .filter(TimedCall::is_etcd_warning)
        .collect();
    assert_eq!(etcd.len(), 7);
    let doc = diagnose(&b);
    let v = verdict(&doc, "Etcd", "etcd");
    assert_eq!(v["class"], "Storage");
    assert_eq!(v["severity"], "warning");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("while its health checks pass")
    );
    assert!(
        doc["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["severity"] != "critical")
    );
}

/// Work traced by an extension API server, and kube-apiserver's trace of a request to an
/// aggregated API (with a storage call nested in it), are never kube-apiserver's storage.
#[test]
fn an_extension_servers_storage_and_aggregated_requests_are_never_kube_apiservers() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::copy(
        repo().join("fixtures/raw/00-healthy/apiservices.json"),
        d.join("apiservices.json"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("fixtures/raw/00-healthy/kas-readyz.txt"),
        d.join("kas-readyz.txt"),
    )
    .unwrap();
    // kube-apiserver's log (core paths vote for it): its own slow storage call, a trace of an
    // aggregated request with a storage call nested in it, and a storage key of that group.
    std::fs::write(
        d.join("kas.log"),
        r#"I1129 09:40:03.100000   32417 trace.go:205] Trace[11]: "List" url:/api/v1/namespaces/a/configmaps,user-agent:k,audit-id:1,client:127.0.0.1,accept:*/*,protocol:HTTP/2.0 (29-Nov-2026 09:40:00.000) (total time: 3100ms):
Trace[11]: ["List etcd3" key:/configmaps/a,resourceVersion:,resourceVersionMatch:,limit:500,continue: 3000ms (09:40:00.001)]
Trace[11]: [3.1s] [3.1s] END
I1129 09:40:13.100000   32417 trace.go:205] Trace[12]: "List" url:/apis/wardle.example.com/v1alpha1/namespaces/a/flunders,user-agent:k,audit-id:2,client:127.0.0.1,accept:*/*,protocol:HTTP/2.0 (29-Nov-2026 09:40:10.000) (total time: 3100ms):
Trace[12]: ["List etcd3" key:/wardle.example.com/flunders/a,resourceVersion:,resourceVersionMatch:,limit:500,continue: 3000ms (09:40:10.001)]
Trace[12]: [3.1s] [3.1s] END
I1129 09:40:23.100000   32417 trace.go:205] Trace[13]: "List etcd3" key:/wardle.example.com/flunders/b,resourceVersion:,resourceVersionMatch:,limit:500,continue: (29-Nov-2026 09:40:20.000) (total time: 3000ms):
Trace[13]: [3s] [3s] END
"#,
    )
    .unwrap();
    let b = import(d);
    let storage: Vec<String> = b
        .timed_hops
        .iter()
        .flat_map(|h| h.calls())
        .filter(TimedCall::is_apiserver_storage)
        .map(|c| c.fields()["key"].clone())
        .collect();
    assert_eq!(storage, ["/configmaps/a"]);
    let aggregated = &b.timed_hops[1];
    assert_eq!(
        aggregated.target.as_ref().map(|t| t.name.as_str()),
        Some("v1alpha1.wardle.example.com")
    );
    assert_eq!(
        b.timed_hops[2].target.as_ref().map(|t| t.kind.as_str()),
        Some("APIService")
    );

    // The extension server's own log of the same kind of traces: not kube-apiserver's at all.
    let ext = repo().join("fixtures/incidents/extension-storage-slow-traces");
    let b = import(&ext);
    assert!(!b.timed_hops.is_empty());
    assert!(
        b.timed_hops
            .iter()
            .flat_map(|h| h.calls())
            .all(|c| !c.is_apiserver_storage() && !c.is_etcd_warning()),
        "{:#?}",
        b.timed_hops
    );
    let doc = diagnose(&b);
    assert!(
        doc["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["class"] != "Storage"),
        "{doc:#}"
    );
}

/// Pieces real blocks are made of, to build garbled logs from.
const PIECES: &[&str] = &[
    "I1129 08:55:55.350188   32417 trace.go:205] ",
    "Trace[25268463]: ",
    "Trace[7]:  ",
    "\"Create\" ",
    "\"List etcd3\" ",
    "\"Call validating webhook\" ",
    "url:/api/v1/namespaces/x/configmaps,",
    "configuration:vwh,webhook:w.example.com,resource:/v1, Resource=configmaps,",
    "key:/wardle.example.com/flunders,",
    "(29-Nov-2026 08:55:45.342) ",
    "(total time: 10007ms):",
    "---\"Object stored in database\" ",
    "[\"Call mutating webhook\" ",
    "8004ms (08:55:50.123)",
    "]",
    "[10.007600656s] [10.007600656s] END",
    "[-]etcd failed: context deadline exceeded",
    "{\"level\":\"warn\",\"msg\":\"apply request took too long\",\"took\":\"",
    "2.1s\"}",
    "W | etcdserver: request \"x\" with result \"y\" took too long (",
    "\n",
    "\n",
    "\n",
    "\u{fffd}",
    "é",
    "",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Logs glued from the pieces of real blocks, cut anywhere: the import never panics, and
    /// inside a directory it never fails.
    #[test]
    fn garbled_trace_logs_never_panic(
        parts in proptest::collection::vec(0..PIECES.len(), 1..80),
        cut in 0usize..4000,
    ) {
        let mut text: String = parts.iter().map(|&i| PIECES[i]).collect();
        let cut = cut.min(text.len());
        let cut = (0..=cut).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
        text.truncate(cut);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.log"), &text).unwrap();
        std::fs::write(
            tmp.path().join("readyz.txt"),
            "[+]ping ok\n[+]etcd ok\nreadyz check passed\n",
        )
        .unwrap();
        let b = import_paths_with(
            &[tmp.path().to_path_buf()],
            "2030-01-01T00:00:00Z".parse().unwrap(),
            ImportOptions::default(),
        );
        prop_assert!(b.is_ok(), "{:?}", b.err().map(|e| e.to_string()));
        let b = b.unwrap();
        // And the facts and rules over them hold up too.
        let _ = diagnose(&b);
    }

    /// Any bytes at all, as a file inside a directory: a gap or evidence, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x"), &bytes).unwrap();
        std::fs::write(tmp.path().join("readyz.txt"), "[+]ping ok\nreadyz check passed\n").unwrap();
        let b = import_paths_with(
            &[tmp.path().to_path_buf()],
            "2030-01-01T00:00:00Z".parse().unwrap(),
            ImportOptions::default(),
        );
        prop_assert!(b.is_ok(), "{:?}", b.err().map(|e| e.to_string()));
    }
}
