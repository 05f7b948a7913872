//! The TLS check of a backend — an APIService's extension server, a webhook server, a conversion
//! webhook — collection side: shake hands with the backend, keep the chain it served, and verify
//! that chain the way kube-apiserver's client would. Nothing here judges; the verdicts are rules.
//!
//! The whole check, in the order it runs:
//!
//! 1. The trust: each owner's `caBundle` is decoded into `ca_bundle` certificates when its object is
//!    read (`crate::bundle::from_k8s`, stage one).
//! 2. Who to dial, for which name ([`handshake::targets`]): `<service>.<namespace>.svc` or the
//!    webhook URL's host, at the address `--backend-address` (or the cluster's DNS) gives.
//! 3. The handshake ([`handshake::capture_all`], stage three): it accepts any chain and records it
//!    as `served_chain` certificates; a backend that cannot be dialled is a gap and a probe.
//! 4. The verification ([`verify::verify_served_chains`], after collection): the chain against the
//!    owner's caBundle, for the name, at the collection time, worded as Go's `crypto/x509` words it
//!    (`crate::pki::verify_server_chain`); the outcome is kept on the leaf.
//! 5. The facts (`crate::engine::facts::tls`): caBundle, served chain, SAN coverage, days left and
//!    the verification, as the `tls` variable of the owner's rules.
//! 6. The rules: `rules/aggregation/aggregation-tls-*.yaml`, `rules/admission/*-tls-*.yaml`.
//!
//! An offline bundle imported from `kubectl get … -o yaml` and `openssl s_client` output verifies
//! its chains at import instead (`crate::bundle::raw`), with the same `pki` call. Not here either:
//! the TLS of the connection to the API server itself, worded as kubectl words it
//! ([`super::tls_words`]), and the reference server's own TLS (`crate::refserver::tls`).

pub mod handshake;
pub mod verify;

pub use handshake::{Handshakes, TlsTarget, capture_all, capture_chain, targets};
pub use verify::verify_served_chains;

use super::sources::{Contribution, Found, Run, SourceFuture};
use crate::bundle::EvidenceBundle;

/// The `certificates` entry (stage three): the handshake with every backend stage one named, at
/// the address stage two's Service and endpoints give (or `--backend-address`).
pub(super) fn handshakes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let targets = targets(
            found.bundle,
            &run.found_backends(),
            &run.opts.backend_addresses,
        );
        let Handshakes {
            certs,
            gaps,
            probes,
        } = capture_all(targets, run.opts.request_timeout, run.deadline).await;
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.certificates.extend(certs)
            })),
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}
