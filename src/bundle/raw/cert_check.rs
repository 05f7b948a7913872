//! Served leaf certificates → the object they serve, and whether they verify against its caBundle.
//!
//! A supplied leaf belongs to the APIService, webhook or conversion webhook whose expected server
//! name (`<svc>.<ns>.svc`, or the URL host) it covers, or, failing that, whose caBundle holds a CA
//! with the leaf's issuer name. It is then verified exactly as the API server's client would —
//! against that caBundle, for that name — at the bundle's collection time, and the outcome is
//! recorded in Go's words (`x509: certificate signed by unknown authority`). This is the check the
//! aggregator's availability probe skips (DESIGN §1 rule 7).

use std::net::IpAddr;

use jiff::Timestamp;

use crate::bundle::{Certificate, Verification};

use super::state::{CaTrust, Importer};

/// Associate and verify every supplied leaf.
pub(crate) fn verify_supplied_leaves(imp: &mut Importer, at: Timestamp) {
    for file in &imp.cert_files {
        let Some(pos) = file
            .cert_indexes
            .iter()
            .position(|&i| !imp.bundle.certificates[i].is_ca)
        else {
            continue;
        };
        let leaf_index = file.cert_indexes[pos];
        if imp.bundle.certificates[leaf_index].verification.is_some() {
            continue;
        }
        let leaf = &imp.bundle.certificates[leaf_index];
        let Some((trust, server_name)) = owner_of(leaf, &imp.ca_trusts) else {
            continue;
        };
        let chain = &file.ders[pos..];
        let verification = match crate::pki::pem_certificates(&trust.pem) {
            Ok(roots) => {
                let outcome = crate::pki::verify_server_chain(chain, &roots, &server_name, at);
                Verification {
                    trust: format!("caBundle of {}", trust.owner),
                    server_name,
                    ok: outcome.is_ok(),
                    error: outcome.err().map(|e| e.to_string()),
                    at,
                }
            }
            Err(e) => Verification {
                trust: format!("caBundle of {}", trust.owner),
                server_name,
                ok: false,
                error: Some(format!("the caBundle does not decode: {e}")),
                at,
            },
        };
        let owner = trust.owner.clone();
        let leaf = &mut imp.bundle.certificates[leaf_index];
        leaf.origin.owner = Some(owner);
        leaf.verification = Some(verification);
    }
}

/// The trust a leaf belongs to, and the server name to verify: by name first, then by issuer.
fn owner_of<'a>(leaf: &Certificate, trusts: &'a [CaTrust]) -> Option<(&'a CaTrust, String)> {
    let by_name = trusts.iter().find_map(|t| {
        let name = t.server_name.as_deref()?;
        covers(leaf, name).then(|| (t, name.to_string()))
    });
    by_name.or_else(|| {
        trusts.iter().find_map(|t| {
            let name = t.server_name.clone()?;
            let cas = crate::pki::decode_pem(&t.pem).ok()?;
            cas.iter()
                .any(|(ca, _)| ca.subject == leaf.issuer)
                .then_some((t, name))
        })
    })
}

/// Whether the leaf's SANs cover `host` (Go's rules: IPs against IP SANs, DNS names against DNS
/// SANs with a wildcard only in the leftmost label; the Common Name is never used).
fn covers(leaf: &Certificate, host: &str) -> bool {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return leaf
            .ip_addresses
            .iter()
            .any(|a| a.parse::<IpAddr>().is_ok_and(|a| a == ip));
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    leaf.dns_names.iter().any(|pattern| {
        let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
        match pattern.strip_prefix("*.") {
            Some(rest) => host
                .split_once('.')
                .is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
            None => pattern == host,
        }
    })
}
