//! The verification step of the TLS check: every served chain a handshake captured
//! ([`super::handshake`]) is verified the way the API server's client verifies it — against the
//! owner's caBundle, for the name it dials, at the collection time — and the outcome, in Go's
//! words, is recorded on the chain's leaf ([`Verification`]) for the engine's `tls` facts.
//!
//! It runs once, after everything is collected, because it needs the whole bundle: the owner's
//! caBundle (stage one) and the chain (stage three), and the collection time. The verification
//! itself is [`crate::pki::verify_server_chain`]; this file picks the chain, the roots and the name.
//! A raw import verifies the chains it finds in files the same way, in `crate::bundle::raw`
//! (it has no collection to run in).

use crate::bundle::{CertSource, Certificate, EvidenceBundle, Kind, ObjectRef, Verification};

/// Verify every served chain in the bundle against its owner's caBundle, for the owner's expected
/// server name, at the bundle's collection time; record the result on the chain's leaf.
///
/// Owners and names: an APIService verifies `<service>.<namespace>.svc`; a webhook or conversion
/// webhook its Service's `<name>.<namespace>.svc` or its URL host. Chains whose owner has no caBundle
/// in the bundle are verified against an empty trust store (what the API server would do without a
/// caBundle is to use the system roots, which never hold a cluster-internal CA).
pub fn verify_served_chains(bundle: &mut EvidenceBundle) {
    let at = bundle
        .collection
        .collected_at
        .unwrap_or_else(jiff::Timestamp::now);
    let mut plans = Vec::new();
    for (i, c) in bundle.certificates.iter().enumerate() {
        if c.origin.source != CertSource::ServedChain || c.origin.chain_index != 0 {
            continue;
        }
        let Some(owner) = &c.origin.owner else {
            continue;
        };
        let Some(server_name) = expected_server_name(bundle, owner) else {
            continue;
        };
        let chain: Vec<_> = bundle
            .certificates
            .iter()
            .filter(|x| {
                x.origin.source == CertSource::ServedChain
                    && x.origin.owner.as_ref() == Some(owner)
                    && x.origin.endpoint == c.origin.endpoint
                    && x.origin.file == c.origin.file
            })
            .filter_map(|x| x.der().map(|d| (x.origin.chain_index, d)))
            .collect();
        let mut chain = chain;
        chain.sort_by_key(|(i, _)| *i);
        let roots: Vec<_> = bundle
            .certificates
            .iter()
            .filter(|x| {
                x.origin.source == CertSource::CaBundle && x.origin.owner.as_ref() == Some(owner)
            })
            .filter_map(Certificate::der)
            .collect();
        if chain.is_empty() {
            continue;
        }
        let ders: Vec<_> = chain.into_iter().map(|(_, d)| d).collect();
        let result = crate::pki::verify_server_chain(&ders, &roots, &server_name, at);
        plans.push((
            i,
            Verification {
                trust: format!("caBundle of {owner}"),
                server_name,
                ok: result.is_ok(),
                error: result.err().map(|e| e.to_string()),
                at,
            },
        ));
    }
    for (i, v) in plans {
        bundle.certificates[i].verification = Some(v);
    }
}

/// The host name a client of `owner`'s backend verifies.
pub fn expected_server_name(bundle: &EvidenceBundle, owner: &ObjectRef) -> Option<String> {
    match owner.kind {
        Kind::ApiService => bundle
            .api_service(&owner.name)
            .and_then(|a| a.service.as_ref())
            .map(|s| s.server_name()),
        Kind::ValidatingWebhook | Kind::MutatingWebhook => bundle
            .webhooks
            .iter()
            .find(|w| w.name == owner.name && w.kind.object_kind() == owner.kind)
            .and_then(|w| w.target.server_name()),
        Kind::CustomResourceDefinition => bundle
            .crds
            .iter()
            .find(|c| c.name == owner.name)
            .and_then(|c| c.conversion.webhook.as_ref())
            .and_then(|w| w.server_name()),
        _ => None,
    }
}
