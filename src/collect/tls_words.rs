//! kubectl's words for a failed TLS check of the API server, and the flag that fixes it.
//!
//! rustls says `invalid peer certificate: UnknownIssuer`; kubectl, on the same server, says
//! `Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by
//! unknown authority`. An on-call engineer searches for kubectl's words and knows its fixes, so a
//! connection that fails its certificate check is reported in Go's wording ([`tls_words`]) with
//! the kubectl flag that fixes it ([`unreachable_message`]): `--certificate-authority` or
//! `--insecure-skip-tls-verify` for an unknown authority, `--tls-server-name` for a name mismatch.
//!
//! The error is found by type in the source chain (`rustls::Error`, which tokio-rustls wraps in an
//! `io::Error` whose `source()` skips it, so the `io::Error`'s inner error is looked at too); the
//! Go strings themselves come from [`crate::pki`], which words its own chain verification the same
//! way. What this file does not own: deciding that the cluster is unreachable (the collection does).

use rustls::CertificateError;

/// The prefix Go's TLS client puts before a verification failure. Newer Go adds it; older clients
/// show the bare `x509: …` (REFERENCE.md §2.3), so searches should match on the `x509:` part and
/// the prefix is here only to read like the kubectl an on-call engineer runs today.
pub const TLS_PREFIX: &str = "tls: failed to verify certificate: ";

/// kubectl's words for a certificate check that failed somewhere in `e`'s source chain, e.g.
/// `tls: failed to verify certificate: x509: certificate signed by unknown authority`; `None` when
/// the failure is not a certificate check.
pub fn tls_words(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = rustls_error(err) {
            return certificate_words(r).map(|w| format!("{TLS_PREFIX}{w}"));
        }
        cur = err.source();
    }
    None
}

/// `err` as a rustls error, looking inside `io::Error`s (hyper's connector wraps tokio-rustls'
/// `io::Error` in another one).
fn rustls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    // Bounded: real chains are two or three `io::Error`s deep; the bound only keeps a
    // self-referential `get_ref` from looping.
    let mut cur = err;
    for _ in 0..8 {
        if let Some(r) = cur.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        let inner = cur.downcast_ref::<std::io::Error>()?.get_ref()?;
        cur = inner;
    }
    None
}

/// Go's `x509: …` message for a rustls certificate error.
fn certificate_words(e: &rustls::Error) -> Option<String> {
    let rustls::Error::InvalidCertificate(c) = e else {
        return None;
    };
    Some(match c {
        CertificateError::UnknownIssuer => "x509: certificate signed by unknown authority".into(),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            // rustls gives the presented names as Debug text (`DnsName("x")`, `IpAddress(1.2.3.4)`);
            // Go's `HostnameError` lists them bare, DNS names and IPs apart, so they are unwrapped
            // and handed to the same wording the chain check in `pki` uses.
            let host = expected.to_str().into_owned();
            let (mut dns, mut ips) = (Vec::new(), Vec::new());
            for p in presented {
                if let Some(name) = p
                    .strip_prefix("DnsName(\"")
                    .and_then(|n| n.strip_suffix("\")"))
                {
                    dns.push(name.to_string());
                } else if let Some(ip) = p
                    .strip_prefix("IpAddress(")
                    .and_then(|n| n.strip_suffix(')'))
                {
                    ips.push(ip.to_string());
                }
            }
            crate::pki::hostname_text(&host, &dns, &ips, false)
        }
        CertificateError::NotValidForName => {
            "x509: certificate is not valid for the server's name".into()
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => {
            // Go goes on with `: current time X is after Y`; the common prefix is the part
            // people search for, and the times are in the certificate facts anyway.
            "x509: certificate has expired or is not yet valid".into()
        }
        // Go reports a signature that does not verify against any candidate parent as an
        // unknown authority ("possibly because of … while trying to verify candidate authority
        // certificate"), so kubectl users know this case under that name.
        CertificateError::BadSignature => {
            "x509: certificate signed by unknown authority (a signature does not verify)".into()
        }
        other => format!("x509: {other:?}"),
    })
}

/// The kubectl flags that fix a TLS verification failure worded by [`tls_words`].
pub fn fix_hint(words: &str) -> Option<&'static str> {
    let x509 = words.strip_prefix(TLS_PREFIX)?;
    Some(
        if x509.starts_with("x509: certificate signed by unknown authority") {
            "pass --certificate-authority FILE with the CA that signed the API server's certificate, \
         or --insecure-skip-tls-verify to skip the check"
        } else if x509.starts_with("x509: certificate is valid for")
            || x509.starts_with("x509: certificate is not valid")
            || x509.starts_with("x509: cannot validate certificate")
        {
            "pass --tls-server-name with a name the certificate is valid for, or \
         --insecure-skip-tls-verify to skip the check"
        } else {
            "--insecure-skip-tls-verify skips the check"
        },
    )
}

/// The one-line message for an API server that could not be reached: kubectl's `Unable to connect
/// to the server: …` with the fix when its certificate failed the check, otherwise what failed.
pub fn unreachable_message(server: &str, failure: &str) -> String {
    match fix_hint(failure) {
        Some(hint) => format!("Unable to connect to the server: {failure} ({server}; {hint})"),
        None => format!("the API server at {server} could not be reached: {failure}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(c: CertificateError) -> Option<String> {
        // As hyper's connector returns it: tokio-rustls' io::Error inside another.
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(c),
        );
        tls_words(&std::io::Error::other(tls))
    }

    #[test]
    fn rustls_errors_read_as_kubectl_says_them() {
        assert_eq!(
            words(CertificateError::UnknownIssuer).as_deref(),
            Some(
                "tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )
        );
        let name = rustls_pki_types::ServerName::try_from("foo.example")
            .expect("a DNS name")
            .to_owned();
        assert_eq!(
            words(CertificateError::NotValidForNameContext {
                expected: name,
                presented: vec![
                    "DnsName(\"localhost\")".into(),
                    "DnsName(\"kubernetes\")".into(),
                    "IpAddress(127.0.0.1)".into(),
                ],
            })
            .as_deref(),
            Some(
                "tls: failed to verify certificate: x509: certificate is valid for localhost, \
                 kubernetes, not foo.example"
            )
        );
        assert!(tls_words(&std::io::Error::other("connection refused")).is_none());
    }

    #[test]
    fn the_message_names_the_flag_that_fixes_it() {
        let m = unreachable_message(
            "https://127.0.0.1:6443",
            "tls: failed to verify certificate: x509: certificate signed by unknown authority",
        );
        assert!(
            m.starts_with("Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority"),
            "{m}"
        );
        assert!(
            m.contains("--certificate-authority") && m.contains("--insecure-skip-tls-verify"),
            "{m}"
        );
        assert!(!m.contains('\n'));
        let refused = unreachable_message("https://127.0.0.1:1", "connection refused");
        assert_eq!(
            refused,
            "the API server at https://127.0.0.1:1 could not be reached: connection refused"
        );
    }
}
