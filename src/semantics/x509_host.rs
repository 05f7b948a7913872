//! Does a certificate name a host? Go's `crypto/x509` rules (`(*Certificate).VerifyHostname`,
//! `matchHostnames`, `matchExactly`, `validHostname`), because every TLS client on an extension
//! path — the aggregator's proxy, the webhook client, kubectl — is Go's.
//!
//! * An IP host (optionally in `[…]`) is matched only against IP SANs, by address value.
//! * A DNS host is matched only against DNS SANs; the Common Name is never used.
//! * When both the host and the SAN are well-formed host names, matching is case-insensitive
//!   (ASCII), a trailing dot on the host is ignored, and `*` is a wildcard only as the whole
//!   leftmost label, matching exactly one non-empty label (`*.example.com` covers `a.example.com`,
//!   not `a.b.example.com` nor `example.com`; `*.svc` covers `x.svc`). A bare `*` is not a pattern.
//! * Otherwise (a SAN with a trailing dot, a `*` elsewhere, odd characters) only an exact,
//!   case-insensitive match counts — Go is used where names are not DNS and always allows that.
//!
//! Which Go: the one kube-apiserver's clients are built with across the supported series,
//! Kubernetes 1.24 (Go 1.18) to the newest (Go 1.25). In that range `VerifyHostname`,
//! `validHostname` (split into `validHostnamePattern`/`validHostnameInput`, rejecting a bare `*`),
//! `matchHostnames` and `matchExactly` are the same, and `Certificate.Verify` checks in the same
//! order — the leaf's validity period, then `VerifyHostname`, then chain building, then extended
//! key usage, which `pki::verify_server_chain` follows. Older Go differed, outside the supported
//! range: before the pattern/input split a bare `*` SAN was a valid pattern and matched
//! any one-label host (`localhost`); Go up to 1.14 fell back to the Common Name when there were no
//! SANs (1.15–1.16 only with `GODEBUG=x509ignoreCN=0`, removed in 1.17), and the "legacy Common
//! Name" message lost its GODEBUG hint in 1.17.

use std::net::IpAddr;

/// Go's `validHostname`: labels of letters, digits, `_`, and `-` (not first); no empty label; a
/// pattern may have `*` as its whole first label; an input may end in one dot.
fn valid_hostname(host: &str, is_pattern: bool) -> bool {
    let host = if is_pattern {
        host
    } else {
        host.strip_suffix('.').unwrap_or(host)
    };
    if host.is_empty() || host == "*" {
        return false;
    }
    host.split('.').enumerate().all(|(i, part)| {
        !part.is_empty()
            && ((is_pattern && i == 0 && part == "*")
                || part
                    .chars()
                    .enumerate()
                    .all(|(j, c)| c.is_ascii_alphanumeric() || c == '_' || (c == '-' && j != 0)))
    })
}

/// Go's `matchExactly`: case-insensitive equality of two names, neither empty nor `.`.
fn match_exactly(a: &str, b: &str) -> bool {
    !matches!(a, "" | ".") && !matches!(b, "" | ".") && a.eq_ignore_ascii_case(b)
}

/// Go's `matchHostnames`: label-by-label, case-insensitive, `*` as the whole first label of the
/// pattern matching any one label, the host's trailing dot ignored.
pub fn match_hostnames(pattern: &str, host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if pattern.is_empty() || host.is_empty() {
        return false;
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let h: Vec<&str> = host.split('.').collect();
    p.len() == h.len()
        && p.iter()
            .zip(&h)
            .enumerate()
            .all(|(i, (pl, hl))| (i == 0 && *pl == "*") || pl.eq_ignore_ascii_case(hl))
}

/// Whether DNS SAN `pattern` covers DNS host `host` (Go's loop body in `VerifyHostname`).
pub fn dns_name_matches(pattern: &str, host: &str) -> bool {
    if valid_hostname(host, false) && valid_hostname(pattern, true) {
        match_hostnames(pattern, host)
    } else {
        match_exactly(pattern, host)
    }
}

/// The IP address a host names, if it is one: Go accepts `[::1]` as well as `::1`.
pub fn host_ip(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// Whether a certificate with these SANs is valid for `host` (Go's `VerifyHostname`). SANs that do
/// not parse as addresses never match an IP host.
pub fn verify_hostname<D: AsRef<str>, I: AsRef<str>>(
    dns_names: &[D],
    ip_addresses: &[I],
    host: &str,
) -> bool {
    if let Some(ip) = host_ip(host) {
        // Go's `net.IP.Equal`: an IPv4 address equals its IPv4-mapped IPv6 form.
        return ip_addresses.iter().any(|a| {
            a.as_ref()
                .parse::<IpAddr>()
                .is_ok_and(|a| a.to_canonical() == ip.to_canonical())
        });
    }
    dns_names
        .iter()
        .any(|pattern| dns_name_matches(pattern.as_ref(), host))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The cases with their Go sources are in tests/semantics/x509_host.yaml; this pins the split
    // between the wildcard path and the exact-only path.
    #[test]
    fn only_valid_names_get_wildcards_and_trailing_dots() {
        assert!(dns_name_matches("*.wardle.svc", "API.wardle.svc."));
        assert!(!dns_name_matches("*.wardle.svc.", "api.wardle.svc"));
        assert!(dns_name_matches("weird name", "WEIRD NAME"));
        assert!(!dns_name_matches("-bad.svc", "x.svc"));
        assert_eq!(host_ip("[::1]"), "::1".parse().ok());
        assert!(verify_hostname(&[""; 0], &["::ffff:10.0.0.1"], "10.0.0.1"));
    }
}
