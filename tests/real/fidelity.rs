//! Fidelity to what a real server's evidence proves: defects found on real servers by the earlier
//! suites, each shown here on a real kube-apiserver before it was fixed.
//!
//! Histogram thresholds judged on what the buckets prove: a webhook or a converter that answers in
//! 600 ms is not near a 1 s timeout, nor a slow converter, although a few calls in the bucket that
//! straddles the threshold (0.5–1 s for webhooks, 0.512–1.024 s for conversions) interpolate to a
//! p99 just below the bucket's top.

use std::time::Duration;

use super::admission::{Client, Crd, Hook, configmap_creates, guarded_namespace, install};
use super::{Expect, Scan, on_both, scan};
use crate::util::k8s::backend::{Answer, Backend};
use crate::util::k8s::{Assets, ControlPlane};

/// A validating webhook with `timeoutSeconds: 1` whose every call takes 600 ms: 60 % of its
/// timeout, under `webhook_latency_ratio` (80 %) and under `webhook_slow_seconds` (1 s). Two
/// clients make a handful of calls in the window, all in the 0.5–1 s bucket; their p99
/// interpolates to ~1 s, yet they prove only > 0.5 s. Nothing is wrong.
fn webhook_steady_under_timeout(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "labeler", &[]);
    let hook = Hook {
        mutating: false,
        configuration: "label-policy",
        name: "labels.policy.example.net",
        label: "labelled",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 1,
    };
    guarded_namespace(&cp, "catalog", hook.label);
    let traffic = configmap_creates(&cp, "catalog");
    backend.answer(Answer::Stall(Duration::from_millis(600)));
    install(&cp, &hook, &backend, &traffic);
    (scan(&cp, &[]), Expect::Healthy)
}
on_both!(webhook_steady_under_timeout);

/// A CRD's conversion webhook whose every conversion takes 600 ms, under
/// `conversion_latency_warn_seconds` (1 s), with readers converting a few objects in the window:
/// all in the 0.512–1.024 s bucket, whose interpolated p99 is ~1.02 s.
fn converter_steady_under_threshold(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(
        &cp.pki.backends_ca,
        "parcel-converter",
        &["parcel-conversion.logistics.svc"],
    );
    let crd = Crd {
        group: "shipping.example.net",
        plural: "parcels",
        kind: "Parcel",
        namespace: "depot",
    };
    let client = Client::service(&backend, "logistics", "parcel-conversion");
    backend.answer(Answer::Stall(Duration::from_millis(600)));
    crd.install(&cp, &client, &backend, 2);
    let _traffic = crd.readers(&cp, 2);
    std::thread::sleep(Duration::from_secs(2));
    (scan(&cp, &[]), Expect::Healthy)
}
on_both!(converter_steady_under_threshold);
