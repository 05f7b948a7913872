//! Supplied leaf certificates → the object they serve, and whether they verify against its caBundle.
//!
//! A certificate lying in a folder is not proof that a server serves it, and incident folders hold
//! many leaves that share a name (IP SAN `127.0.0.1`, `localhost`, wildcards). So for each object
//! with a caBundle (a `CaTrust`) the candidates are the supplied leaves that cover the name its
//! client verifies (`<svc>.<ns>.svc`, or the URL host) — or, when none does, whose issuer is a CA of
//! its caBundle — and each candidate is verified exactly as the API server's client would: against
//! that caBundle, for that name, at the bundle's collection time, in Go's words (`x509: certificate
//! signed by unknown authority`; the check the availability probe skips, docs/diagnosis.md#rule-7). Then:
//!
//! * a candidate that verifies is the object's leaf (a served one first);
//! * none verifies and there is one candidate: it is the object's, with its failed verification;
//! * none verifies and there are several: which one the server serves is unknown — none is
//!   attributed, and a gap says so.
//!
//! A leaf from `openssl s_client` output is a served chain (`served_chain`), any other file's is
//! `file`; the rules decide with a file leaf's failure as support only — a critical TLS verdict
//! needs served evidence (a handshake, s_client output, or an x509 error in a response).

use jiff::Timestamp;

use crate::bundle::certs::CertSource;
use crate::bundle::{Gap, GapReason, Verification};

use super::state::Importer;

/// One supplied leaf: its bundle index and its chain (leaf first).
struct Leaf {
    index: usize,
    chain: Vec<rustls_pki_types::CertificateDer<'static>>,
}

/// Associate and verify every supplied leaf.
pub(crate) fn verify_supplied_leaves(imp: &mut Importer, at: Timestamp) {
    let leaves: Vec<Leaf> = imp
        .cert_files
        .iter()
        .filter_map(|file| {
            let pos = file
                .cert_indexes
                .iter()
                .position(|&i| !imp.bundle.certificates[i].is_ca)?;
            Some(Leaf {
                index: file.cert_indexes[pos],
                chain: file.ders[pos..].to_vec(),
            })
        })
        .filter(|l| imp.bundle.certificates[l.index].verification.is_none())
        .collect();
    // One certificate saved in two files is one candidate (its served copy, when there is one).
    let mut leaves = leaves;
    let certs = &imp.bundle.certificates;
    leaves.sort_by_key(|l| certs[l.index].origin.source != CertSource::ServedChain);
    let mut seen = std::collections::HashSet::new();
    leaves.retain(|l| seen.insert(certs[l.index].sha256.clone()));
    if leaves.is_empty() {
        return;
    }
    let mut chosen: Vec<(usize, usize, Verification)> = Vec::new();
    let mut gaps = Vec::new();
    for (ti, trust) in imp.ca_trusts.iter().enumerate() {
        let Some(server_name) = trust.server_name.clone() else {
            continue;
        };
        let certs = &imp.bundle.certificates;
        let mut candidates: Vec<&Leaf> = leaves
            .iter()
            .filter(|l| covers(&certs[l.index], &server_name))
            .collect();
        if candidates.is_empty() {
            let issuers: Vec<String> = crate::pki::decode_pem(&trust.pem)
                .map(|cas| cas.into_iter().map(|(ca, _)| ca.subject).collect())
                .unwrap_or_default();
            candidates = leaves
                .iter()
                .filter(|l| issuers.contains(&certs[l.index].issuer))
                .collect();
        }
        if candidates.is_empty() {
            continue;
        }
        let roots = crate::pki::pem_certificates(&trust.pem);
        let verified: Vec<(&Leaf, Verification)> = candidates
            .iter()
            .map(|l| {
                let v = match &roots {
                    Ok(roots) => {
                        let outcome =
                            crate::pki::verify_server_chain(&l.chain, roots, &server_name, at);
                        Verification {
                            trust: format!("caBundle of {}", trust.owner),
                            server_name: server_name.clone(),
                            ok: outcome.is_ok(),
                            error: outcome.err().map(|e| e.to_string()),
                            at,
                        }
                    }
                    Err(e) => Verification {
                        trust: format!("caBundle of {}", trust.owner),
                        server_name: server_name.clone(),
                        ok: false,
                        error: Some(format!("the caBundle does not decode: {e}")),
                        at,
                    },
                };
                (*l, v)
            })
            .collect();
        let served_first = |(l, _): &&(&Leaf, Verification)| {
            certs[l.index].origin.source != CertSource::ServedChain
        };
        let mut ok: Vec<&(&Leaf, Verification)> = verified.iter().filter(|(_, v)| v.ok).collect();
        ok.sort_by_key(served_first);
        if let Some((l, v)) = ok.first() {
            chosen.push((l.index, ti, v.clone()));
        } else if let [(l, v)] = verified.as_slice() {
            chosen.push((l.index, ti, v.clone()));
        } else {
            let files: Vec<String> = verified
                .iter()
                .filter_map(|(l, _)| certs[l.index].origin.file.clone())
                .collect();
            gaps.push(Gap::new(
                format!("tls/{}", trust.owner),
                GapReason::NotSupplied,
                format!(
                    "{} supplied certificates name {server_name} ({}) and none chains to the \
                     caBundle of {}: which one the server serves is unknown (capture it: openssl \
                     s_client -connect HOST:PORT -servername {server_name} -showcerts)",
                    verified.len(),
                    files.join(", "),
                    trust.owner
                ),
            ));
        }
    }
    // A leaf two objects chose (two webhooks behind one server) is recorded once per object.
    let mut taken: Vec<usize> = Vec::new();
    for (index, ti, verification) in chosen {
        let owner = imp.ca_trusts[ti].owner.clone();
        let target = if taken.contains(&index) {
            let mut copy = imp.bundle.certificates[index].clone();
            copy.verification = None;
            imp.bundle.certificates.push(copy);
            imp.bundle.certificates.len() - 1
        } else {
            taken.push(index);
            index
        };
        let leaf = &mut imp.bundle.certificates[target];
        leaf.origin.owner = Some(owner);
        leaf.verification = Some(verification);
    }
    imp.bundle.gaps.extend(gaps);
}

/// Whether the leaf's SANs cover `host`: Go's `VerifyHostname` (`crate::semantics::x509_host`, the
/// rule `pki`'s verification applies too); the Common Name is never used.
fn covers(leaf: &crate::bundle::Certificate, host: &str) -> bool {
    crate::semantics::x509_host::verify_hostname(&leaf.dns_names, &leaf.ip_addresses, host)
}
