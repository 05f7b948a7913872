//! Verify a served chain against a caBundle and a server name, failing in Go's words.
//!
//! The order of checks is Go's (`crypto/x509.(*Certificate).Verify`, the same in every release
//! from 1.10 to 1.25): the leaf's validity period first, then the host name (`VerifyHostname`; a
//! server name is always given here), and only then the chain to a trusted root (an unusable
//! candidate root becomes the "possibly because of …" hint) and the key usage. So a leaf that is
//! both wrongly named and signed by an unknown CA reports the name, as Go does. Chain building
//! itself is rustls-webpki's; only the wording and the order are Go's, so that text from a real
//! kube-apiserver, from the reference server and from extpath's own handshake can be matched by
//! the same rules.
//!
//! One known difference from golang/go (`src/crypto/x509/verify.go`), kept because the rules and
//! snapshots depend on the current text: Go reports a root that is outside its validity as that
//! root's own `certificate has expired` error, where this module reports unknown authority with the
//! expiry as the hint. Both messages contain the same `x509: …` phrases the rules match on.

use rustls_pki_types::{CertificateDer, UnixTime};

use super::decode::{CertInfo, decode_der};
use crate::semantics::x509_host;

/// Why a chain did not verify. `Display` is the message Go's crypto/x509 would print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The server sent no certificate.
    #[error("x509: no certificates presented")]
    NoCertificates,
    /// A certificate could not be parsed.
    #[error("x509: malformed certificate: {0}")]
    Malformed(String),
    /// The leaf is outside its validity period.
    #[error(
        "x509: certificate has expired or is not yet valid: current time {now} is {} {bound}",
        if *.expired { "after" } else { "before" }
    )]
    Validity {
        /// `true` when expired, `false` when not yet valid.
        expired: bool,
        /// The verification time, RFC 3339.
        now: String,
        /// `notAfter` (expired) or `notBefore` (not yet valid), RFC 3339.
        bound: String,
    },
    /// No path to a trusted root.
    #[error("x509: certificate signed by unknown authority{}", hint_text(.hint))]
    UnknownAuthority {
        /// `(error, candidate name)` when a root with the right name was tried and failed.
        hint: Option<(String, String)>,
    },
    /// The leaf is not valid for the server name.
    #[error("{}", hostname_text(.host, .dns_names, .ip_addresses, *.legacy_common_name))]
    Hostname {
        /// The name that was checked.
        host: String,
        /// The leaf's DNS SANs.
        dns_names: Vec<String>,
        /// The leaf's IP SANs.
        ip_addresses: Vec<String>,
        /// The leaf has no SAN extension but its CN matches the host.
        legacy_common_name: bool,
    },
    /// Extended key usage does not allow server authentication.
    #[error("x509: certificate specifies an incompatible key usage")]
    IncompatibleUsage,
    /// Anything else webpki rejected.
    #[error("x509: {0}")]
    Other(String),
}

// Go's `UnknownAuthorityError.Error` quotes both parts with `%q`; Rust's `{:?}` escapes the
// same way for the printable ASCII these messages hold.
fn hint_text(hint: &Option<(String, String)>) -> String {
    match hint {
        Some((err, name)) => format!(
            " (possibly because of {err:?} while trying to verify candidate authority certificate {name:?})"
        ),
        None => String::new(),
    }
}

/// Go's `x509: certificate is valid for …, not HOST` (and its IP and empty variants).
pub(crate) fn hostname_text(host: &str, dns: &[String], ips: &[String], legacy_cn: bool) -> String {
    // Go checks this first: a CN-only certificate whose CN names the host is the one case where
    // the fix is "add a SAN" rather than "use another name", so the message says that.
    if legacy_cn {
        return "x509: certificate relies on legacy Common Name field, use SANs instead".into();
    }
    // The list offered is of the kind that was asked for: an IP host lists IP SANs only, since
    // Go never matches an IP against a DNS SAN (RFC 6125 appendix B.2).
    let valid = if host.parse::<std::net::IpAddr>().is_ok() {
        if ips.is_empty() {
            return format!(
                "x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
            );
        }
        ips.join(", ")
    } else {
        dns.join(", ")
    };
    if valid.is_empty() {
        format!("x509: certificate is not valid for any names, but wanted to match {host}")
    } else {
        format!("x509: certificate is valid for {valid}, not {host}")
    }
}

/// Go's `time.RFC3339` rendering of a UTC instant.
pub(crate) fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Verify `chain` (leaf first, then intermediates) against the CA certificates `roots`, for
/// `server_name`, at time `at`.
///
/// # Errors
/// A [`VerifyError`] whose `Display` is Go's message for the first check that fails.
pub fn verify_server_chain(
    chain: &[CertificateDer<'_>],
    roots: &[CertificateDer<'_>],
    server_name: &str,
    at: jiff::Timestamp,
) -> Result<(), VerifyError> {
    let leaf_der = chain.first().ok_or(VerifyError::NoCertificates)?;
    let leaf = decode_der(leaf_der, 0).map_err(|e| VerifyError::Malformed(e.to_string()))?;
    // The leaf's period is checked here rather than left to webpki because webpki reports expiry
    // for whichever certificate of the chain it meets, without the times, and Go's
    // `isValid(leafCertificate, …)` runs before any chain is built and prints both instants:
    // `current time X is after Y` is what lets a reader tell an expired cert from clock skew.
    if at > leaf.not_after {
        return Err(VerifyError::Validity {
            expired: true,
            now: rfc3339(at),
            bound: rfc3339(leaf.not_after),
        });
    }
    if at < leaf.not_before {
        return Err(VerifyError::Validity {
            expired: false,
            now: rfc3339(at),
            bound: rfc3339(leaf.not_before),
        });
    }
    // Go's `Verify` calls `VerifyHostname` right after the leaf's own validity and before
    // `buildChains` (crypto/x509/verify.go, 1.10 → 1.25): a wrongly named leaf from an unknown CA
    // is reported by its name.
    check_hostname(&leaf, server_name)?;

    // webpki trust anchors carry no validity period, so a root outside its own period must be
    // left out of the anchors or it would still verify the chain (a caBundle whose CA expired
    // looks fine until the next rotation fails). One with the leaf's issuer name becomes the hint
    // (see the module doc for how Go words this case).
    let mut hint: Option<(String, String)> = None;
    let mut anchors = Vec::new();
    let mut candidates: Vec<CertInfo> = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let Ok(info) = decode_der(root, i) else {
            continue;
        };
        let usable = info.not_before <= at && at <= info.not_after;
        if info.subject == leaf.issuer {
            if !usable {
                let detail = if at > info.not_after {
                    format!(
                        "x509: certificate has expired or is not yet valid: current time {} is after {}",
                        rfc3339(at),
                        rfc3339(info.not_after)
                    )
                } else {
                    format!(
                        "x509: certificate has expired or is not yet valid: current time {} is before {}",
                        rfc3339(at),
                        rfc3339(info.not_before)
                    )
                };
                hint.get_or_insert((detail, candidate_name(&info)));
            }
            candidates.push(info.clone());
        }
        if usable && let Ok(anchor) = webpki::anchor_from_trusted_cert(root) {
            anchors.push(anchor.to_owned());
        }
    }

    let end_entity = webpki::EndEntityCert::try_from(leaf_der)
        .map_err(|e| VerifyError::Malformed(format!("{e:?}")))?;
    // Judged at `at` (the bundle's collection time, DESIGN §2), never the wall clock, so an
    // analysis rerun next month gives the same verdict on the same bundle.
    let secs = at.as_second().max(0) as u64;
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs));
    let intermediates: Vec<CertificateDer<'_>> = chain[1..].to_vec();
    let result = end_entity.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        &intermediates,
        time,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    );
    if let Err(e) = result {
        return Err(match e {
            webpki::Error::RequiredEkuNotFoundContext(_) => VerifyError::IncompatibleUsage,
            webpki::Error::UnknownIssuer
            | webpki::Error::InvalidSignatureForPublicKey
            | webpki::Error::CertExpired { .. }
            | webpki::Error::CertNotValidYet { .. }
            | webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => {
                // A root with the leaf's issuer name that did not verify the signature: Go names
                // it, with the signature error of its key type. That is a caBundle left stale
                // after its CA was regenerated under the same name; a plainly wrong CA (another
                // name) gets no hint, so the hint is what tells the two stories apart.
                if hint.is_none()
                    && let Some(c) = candidates.first()
                {
                    let err = if c.public_key_algorithm == "RSA" {
                        "crypto/rsa: verification error"
                    } else {
                        "x509: ECDSA verification failure"
                    };
                    hint = Some((err.to_string(), candidate_name(c)));
                }
                VerifyError::UnknownAuthority { hint }
            }
            other => VerifyError::Other(format!("{other:?}")),
        });
    }
    Ok(())
}

// Go's `UnknownAuthorityError.Error` falls back from the CN to the first Organization, then to
// `serial:N`; here it falls back to the whole subject DN. Only a CA without a CN tells them apart.
fn candidate_name(info: &CertInfo) -> String {
    info.common_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| info.subject.clone())
}

/// Go's `VerifyHostname` (`crate::semantics::x509_host`): IP hosts against IP SANs, DNS hosts
/// against DNS SANs. The Common Name is never used; it only changes the message.
fn check_hostname(leaf: &CertInfo, host: &str) -> Result<(), VerifyError> {
    if x509_host::verify_hostname(&leaf.dns_names, &leaf.ip_addresses, host) {
        return Ok(());
    }
    // Go's `VerifyHostname` strips the brackets of an IP host before building `HostnameError`,
    // so the message says `10.0.0.1`, not `[10.0.0.1]`.
    let host_trimmed = host.trim_start_matches('[').trim_end_matches(']');
    // Go's `HostnameError.Error`: a certificate without SANs whose CN would have matched.
    let legacy_common_name = !leaf.has_san_extension
        && leaf
            .common_name
            .as_deref()
            .is_some_and(|cn| x509_host::match_hostnames(cn, host_trimmed));
    Err(VerifyError::Hostname {
        host: host_trimmed.to_string(),
        dns_names: leaf.dns_names.clone(),
        ip_addresses: leaf.ip_addresses.clone(),
        legacy_common_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_messages_are_gos() {
        assert_eq!(
            hostname_text(
                "api.ns.svc",
                &["localhost".into(), "other".into()],
                &[],
                false
            ),
            "x509: certificate is valid for localhost, other, not api.ns.svc"
        );
        assert_eq!(
            hostname_text("api.ns.svc", &[], &[], false),
            "x509: certificate is not valid for any names, but wanted to match api.ns.svc"
        );
        assert_eq!(
            hostname_text("10.0.0.1", &["a".into()], &[], false),
            "x509: cannot validate certificate for 10.0.0.1 because it doesn't contain any IP SANs"
        );
    }
}
