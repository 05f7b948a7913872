//! The `tls` facts of an object that points at a backend (an APIService, a webhook, a conversion
//! webhook): its caBundle, the chain its backend served, and the verification of that chain —
//! judged at the collection time against the server name a client verifies, `<service>.<namespace>.svc`
//! or a webhook URL's host (IP SANs included).
//!
//! This is the engine's part of the APIService TLS check: it reads what collection recorded (the
//! served chain from the handshake, `crate::collect::tls`, and its verification against the
//! caBundle) and turns it into facts; the rules (`rules/aggregation/`, `rules/admission/`) decide.
//! It does no verification of its own. The Service, endpoints and Pods behind the same object are
//! [`super::backend`].

use super::value::Fact;

use super::FactBase;
use super::value::{Obj, list, strings};
use crate::bundle::certs::CertSource;
use crate::bundle::{Certificate, ObjectRef};

/// Whether `name` is covered by a SAN list: Go's `VerifyHostname` (`crate::semantics::x509_host`,
/// the rule the chain verification and the raw importer apply too).
pub fn covers(dns: &[String], ips: &[String], name: &str) -> bool {
    crate::semantics::x509_host::verify_hostname(dns, ips, name)
}

fn cert_fact(base: &FactBase<'_>, c: &Certificate, server_name: &str) -> Fact {
    let (days_left, expired, not_yet_valid) = match base.at {
        Some(at) => {
            let secs = (c.not_after.as_second() - at.as_second()) as f64;
            (secs / 86400.0, at > c.not_after, at < c.not_before)
        }
        None => (f64::MAX, false, false),
    };
    let source = match c.origin.source {
        CertSource::CaBundle => "ca_bundle",
        CertSource::ServedChain => "served_chain",
        CertSource::File => "file",
    };
    Obj::new()
        .s("subject", c.subject.clone())
        .s("issuer", c.issuer.clone())
        .v("dns_names", strings(c.dns_names.clone()))
        .v("ip_addresses", strings(c.ip_addresses.clone()))
        .s("not_before", c.not_before.to_string())
        .s("not_after", c.not_after.to_string())
        .f("days_left", days_left)
        .b("expired", expired)
        .b("not_yet_valid", not_yet_valid)
        .b("is_ca", c.is_ca)
        .b("self_signed", c.self_signed)
        .s("signature_algorithm", c.signature_algorithm.clone())
        .b(
            "covers_server_name",
            covers(&c.dns_names, &c.ip_addresses, server_name),
        )
        .b(
            "legacy_cn_only",
            c.dns_names.is_empty() && c.ip_addresses.is_empty(),
        )
        .s("source", source)
        .i("chain_index", c.origin.chain_index as i64)
        .s("sha256", c.sha256.clone())
        .build()
}

/// `tls`: the certificates of an object (its caBundle and the chain its backend served), judged at
/// the collection time against the server name a client verifies.
pub fn tls_fact(
    base: &FactBase<'_>,
    owner: Option<&ObjectRef>,
    server_name: &str,
    ca_bundle_present: bool,
    insecure: bool,
) -> Fact {
    let owned: Vec<&Certificate> = match owner {
        Some(o) => base
            .index
            .certs
            .get(&(&o.kind, o.name.as_str()))
            .cloned()
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut served: Vec<&Certificate> = owned
        .iter()
        .copied()
        .filter(|c| c.origin.source == CertSource::ServedChain)
        .collect();
    served.sort_by_key(|c| c.origin.chain_index);
    let ca: Vec<&Certificate> = owned
        .iter()
        .copied()
        .filter(|c| c.origin.source != CertSource::ServedChain)
        .collect();
    let served_verification = served.first().and_then(|c| c.verification.as_ref());
    let verification =
        served_verification.or_else(|| owned.iter().find_map(|c| c.verification.as_ref()));
    let all: Vec<Fact> = ca
        .iter()
        .chain(served.iter())
        .map(|c| cert_fact(base, c, server_name))
        .collect();
    let min_days = ca
        .iter()
        .chain(served.iter())
        .filter(|_| base.at.is_some())
        .map(|c| (c.not_after.as_second() - base.at.map_or(0, |a| a.as_second())) as f64 / 86400.0)
        .fold(f64::MAX, f64::min);
    Obj::new()
        .s("server_name", server_name)
        .b("ca_bundle_present", ca_bundle_present)
        .b("insecure", insecure)
        .b("time_known", base.at.is_some())
        .v(
            "ca_bundle",
            list(ca.iter().map(|c| cert_fact(base, c, server_name))),
        )
        .v(
            "served",
            list(served.iter().map(|c| cert_fact(base, c, server_name))),
        )
        .v("certs", list(all))
        .f("min_days_left", min_days)
        .v(
            "verification",
            Obj::new()
                .b("checked", verification.is_some())
                // Of a chain the server presented (a handshake, s_client output), not of a
                // certificate someone kept in a file.
                .b("served", served_verification.is_some())
                .b("ok", verification.is_some_and(|v| v.ok))
                .s(
                    "error",
                    verification
                        .and_then(|v| v.error.clone())
                        .unwrap_or_default(),
                )
                .s(
                    "trust",
                    verification.map(|v| v.trust.clone()).unwrap_or_default(),
                )
                .s(
                    "server_name",
                    verification
                        .map(|v| v.server_name.clone())
                        .unwrap_or_default(),
                )
                .build(),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn san_coverage_follows_go_rules() {
        let dns = vec!["api.wardle-system.svc".to_string(), "*.example.com".into()];
        assert!(covers(&dns, &[], "api.wardle-system.svc"));
        assert!(covers(&dns, &[], "a.example.com"));
        assert!(!covers(&dns, &[], "a.b.example.com"));
        assert!(!covers(&dns, &[], "api.wardle-system"));
        assert!(covers(&[], &["127.0.0.1".into()], "127.0.0.1"));
        assert!(!covers(&dns, &[], "127.0.0.1"));
    }
}
