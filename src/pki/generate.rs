//! Test and reference-server PKI: CAs and leaf certificates with explicit validity, from rcgen.
//!
//! Every certificate's validity is given as absolute times by the caller, never taken from the wall
//! clock here, so a test that needs "expired" or "expires in 10 days" stays true forever (rcgen's own
//! default validity, 1975–4096, would hide expiry bugs). Keys are ECDSA P-256: fast to generate, and
//! what a modern cluster uses.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Start.
    pub not_before: jiff::Timestamp,
    /// End.
    pub not_after: jiff::Timestamp,
}

/// RFC 5280 §4.1.2.5: "the notAfter field SHOULD be assigned the GeneralizedTime value of
/// 99991231235959Z" for a certificate with no well-defined expiration date.
/// In seconds since the epoch: 9999-12-31T23:59:59Z.
const NO_WELL_DEFINED_EXPIRY: i64 = 253_402_300_799;

impl Validity {
    /// Valid from `not_before` with no well-defined expiration (RFC 5280 §4.1.2.5): the
    /// certificate's notAfter is 99991231235959Z, held here as `jiff::Timestamp::MAX`.
    pub fn without_expiry(not_before: jiff::Timestamp) -> Self {
        Validity {
            not_before,
            not_after: jiff::Timestamp::MAX,
        }
    }
    /// Valid from `days_before` days before `at` until `days_after` days after it.
    pub fn around(at: jiff::Timestamp, days_before: i64, days_after: i64) -> Self {
        Validity {
            not_before: at - jiff::SignedDuration::from_hours(24 * days_before),
            not_after: at + jiff::SignedDuration::from_hours(24 * days_after),
        }
    }
    /// Expired one day before `at` (valid for a year before that).
    pub fn expired_at(at: jiff::Timestamp) -> Self {
        Validity {
            not_before: at - jiff::SignedDuration::from_hours(24 * 366),
            not_after: at - jiff::SignedDuration::from_hours(24),
        }
    }
    /// Not valid until one day after `at`.
    pub fn not_yet_valid_at(at: jiff::Timestamp) -> Self {
        Validity {
            not_before: at + jiff::SignedDuration::from_hours(24),
            not_after: at + jiff::SignedDuration::from_hours(24 * 366),
        }
    }
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSpec {
    /// Subject CN.
    pub common_name: String,
    /// Subject O (for client certificates: the Kubernetes groups).
    pub organizations: Vec<String>,
    /// DNS SANs.
    pub dns_names: Vec<String>,
    /// IP SANs.
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// Validity.
    pub validity: Validity,
    /// Include the serverAuth EKU.
    pub server_auth: bool,
    /// Include the clientAuth EKU.
    pub client_auth: bool,
}

impl LeafSpec {
    /// A serving certificate for `names` (IP literals become IP SANs).
    pub fn server(names: &[&str], validity: Validity) -> Self {
        let (ips, dns): (Vec<&str>, Vec<&str>) = names
            .iter()
            .partition(|n| n.parse::<std::net::IpAddr>().is_ok());
        LeafSpec {
            common_name: names.first().copied().unwrap_or("server").to_string(),
            organizations: Vec::new(),
            dns_names: dns.into_iter().map(str::to_string).collect(),
            ip_addresses: ips.into_iter().filter_map(|s| s.parse().ok()).collect(),
            validity,
            server_auth: true,
            client_auth: false,
        }
    }

    /// A client certificate for user `cn` in `groups`.
    ///
    /// Kubernetes' x509 authenticator reads the user from the subject CN and the groups from the O
    /// fields; the front-proxy client certificate is checked against
    /// `--requestheader-allowed-names` by its CN (REFERENCE §2.3, `x509: subject with cn=%s is not
    /// in the allowed list`).
    pub fn client(cn: &str, groups: &[&str], validity: Validity) -> Self {
        LeafSpec {
            common_name: cn.to_string(),
            organizations: groups.iter().map(|s| s.to_string()).collect(),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            validity,
            server_auth: false,
            client_auth: true,
        }
    }
}

/// An issued certificate with its key (the key stays in memory; it is never written to a bundle).
pub struct Issued {
    /// PEM of the certificate.
    pub cert_pem: String,
    /// DER of the certificate.
    pub cert_der: CertificateDer<'static>,
    /// PKCS#8 PEM of the key.
    pub key_pem: String,
    key_der: Vec<u8>,
}

impl Issued {
    /// The private key for rustls.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// A certificate authority that can issue leaves.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// PEM of the CA certificate (what goes into a caBundle).
    pub cert_pem: String,
    /// DER of the CA certificate.
    pub cert_der: CertificateDer<'static>,
    serial: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

// rcgen has no error variant for an out-of-range time, so the nearest one carries the message;
// callers only print it. `Timestamp::MAX` is what decoding reads RFC 5280 §4.1.2.5's
// 99991231235959Z as (`super::decode::asn1_time`), so it is written back as that value.
fn offset(t: jiff::Timestamp) -> Result<time::OffsetDateTime, rcgen::Error> {
    let seconds = if t == jiff::Timestamp::MAX {
        NO_WELL_DEFINED_EXPIRY
    } else {
        t.as_second()
    };
    time::OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| {
        rcgen::Error::InvalidAsn1String(rcgen::InvalidAsn1String::PrintableString(
            "timestamp out of range".into(),
        ))
    })
}

impl TestCa {
    /// A self-signed CA named `common_name`.
    ///
    /// # Errors
    /// When rcgen cannot generate the key or certificate.
    pub fn new(common_name: &str, validity: Validity) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = offset(validity.not_before)?;
        params.not_after = offset(validity.not_after)?;
        params.serial_number = Some(SerialNumber::from_slice(&[1]));
        let key = KeyPair::generate()?;
        let issuer = CertifiedIssuer::self_signed(params, key)?;
        Ok(TestCa {
            cert_pem: issuer.pem(),
            cert_der: issuer.der().clone(),
            issuer,
            serial: std::sync::atomic::AtomicU64::new(2),
        })
    }

    /// Issue a leaf certificate.
    ///
    /// # Errors
    /// When rcgen cannot generate the key or certificate.
    pub fn issue(&self, spec: &LeafSpec) -> Result<Issued, rcgen::Error> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, spec.common_name.as_str());
        for o in &spec.organizations {
            dn.push(DnType::OrganizationName, o.as_str());
        }
        params.distinguished_name = dn;
        for d in &spec.dns_names {
            params
                .subject_alt_names
                .push(SanType::DnsName(d.as_str().try_into()?));
        }
        for ip in &spec.ip_addresses {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        params.not_before = offset(spec.validity.not_before)?;
        params.not_after = offset(spec.validity.not_after)?;
        // Go ignores the KeyUsage bits of a leaf ("KeyUsage status flags are ignored",
        // crypto/x509 verify.go) and decides by the extended key usage below, so the EKU is what
        // makes a leaf fit to serve or to authenticate; webpki checks it too.
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        if spec.server_auth {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if spec.client_auth {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        // Serials must be unique per issuer (RFC 5280 §4.1.2.2); the CA itself took 1.
        let serial = self
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        params.serial_number = Some(SerialNumber::from_slice(&serial.to_be_bytes()));
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{VerifyError, decode_pem, verify_server_chain};

    fn at() -> jiff::Timestamp {
        "2026-11-29T08:00:00Z".parse().unwrap()
    }

    #[test]
    fn verification_fails_in_gos_words() {
        let now = at();
        let ca = TestCa::new("wardle-ca", Validity::around(now, 30, 3650)).unwrap();
        let other = TestCa::new("some-other-ca", Validity::around(now, 30, 3650)).unwrap();
        let good = ca
            .issue(&LeafSpec::server(
                &["api.wardle-system.svc", "localhost", "127.0.0.1"],
                Validity::around(now, 1, 365),
            ))
            .unwrap();
        let chain = [good.cert_der.clone()];
        assert_eq!(
            verify_server_chain(
                &chain,
                std::slice::from_ref(&ca.cert_der),
                "api.wardle-system.svc",
                now
            ),
            Ok(())
        );
        let wrong_ca = verify_server_chain(
            &chain,
            std::slice::from_ref(&other.cert_der),
            "api.wardle-system.svc",
            now,
        )
        .unwrap_err();
        assert_eq!(
            wrong_ca.to_string(),
            "x509: certificate signed by unknown authority"
        );
        let wrong_name = verify_server_chain(
            &chain,
            std::slice::from_ref(&ca.cert_der),
            "api.other.svc",
            now,
        )
        .unwrap_err();
        assert_eq!(
            wrong_name.to_string(),
            "x509: certificate is valid for api.wardle-system.svc, localhost, not api.other.svc"
        );
        // Wrongly named AND signed by an unknown CA: Go's `Verify` (crypto/x509/verify.go, 1.10 →
        // 1.25) calls `VerifyHostname` before `buildChains`, so the name is what it reports.
        let both_wrong = verify_server_chain(
            &chain,
            std::slice::from_ref(&other.cert_der),
            "api.other.svc",
            now,
        )
        .unwrap_err();
        assert_eq!(both_wrong, wrong_name);
        // The leaf's own validity comes before both.
        let expired_elsewhere = verify_server_chain(
            &chain,
            std::slice::from_ref(&other.cert_der),
            "api.other.svc",
            "2031-01-01T00:00:00Z".parse().unwrap(),
        )
        .unwrap_err();
        assert!(
            matches!(
                expired_elsewhere,
                VerifyError::Validity { expired: true, .. }
            ),
            "{expired_elsewhere}"
        );
        let expired = ca
            .issue(&LeafSpec::server(
                &["api.wardle-system.svc"],
                Validity::expired_at(now),
            ))
            .unwrap();
        let err = verify_server_chain(
            std::slice::from_ref(&expired.cert_der),
            std::slice::from_ref(&ca.cert_der),
            "api.wardle-system.svc",
            now,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "x509: certificate has expired or is not yet valid: current time 2026-11-29T08:00:00Z is after 2026-11-28T08:00:00Z"
        );
        // A CA regenerated under the same name: Go names the candidate it tried.
        let twin = TestCa::new("wardle-ca", Validity::around(now, 30, 3650)).unwrap();
        let err = verify_server_chain(
            &chain,
            std::slice::from_ref(&twin.cert_der),
            "api.wardle-system.svc",
            now,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "x509: certificate signed by unknown authority (possibly because of \"x509: ECDSA verification failure\" while trying to verify candidate authority certificate \"wardle-ca\")"
        );
        let decoded = decode_pem(good.cert_pem.as_bytes()).unwrap();
        assert_eq!(decoded[0].0.ip_addresses, vec!["127.0.0.1".to_string()]);
        assert_eq!(decoded[0].0.issuer, "CN=wardle-ca");
    }
}
