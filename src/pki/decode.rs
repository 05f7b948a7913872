//! PEM/DER decoding into [`CertInfo`], the public facts of a certificate.
//!
//! Only public facts leave this module: a caBundle or a served chain is decoded into names, dates
//! and fingerprints, and private keys in the same PEM input are skipped, because a bundle must never
//! carry key material (DESIGN §2, "EvidenceBundle").

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use x509_parser::prelude::*;

/// Why PEM or DER input could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PemError {
    /// No `-----BEGIN CERTIFICATE-----` block at all.
    #[error("no PEM certificate found")]
    NoCertificate,
    /// A block was found but is not valid PEM/base64.
    #[error("malformed PEM: {0}")]
    Malformed(String),
    /// The DER inside is not an X.509 certificate.
    #[error("certificate {index} is not valid X.509: {reason}")]
    BadDer {
        /// 0-based position in the input.
        index: usize,
        /// Parser message.
        reason: String,
    },
}

/// The public facts of one certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// Subject DN.
    pub subject: String,
    /// Subject common name, if any.
    pub common_name: Option<String>,
    /// Issuer DN.
    pub issuer: String,
    /// DNS SANs.
    pub dns_names: Vec<String>,
    /// IP SANs, formatted.
    pub ip_addresses: Vec<String>,
    /// Whether a SAN extension exists at all (Go's "legacy Common Name" message depends on it).
    pub has_san_extension: bool,
    /// Validity start.
    pub not_before: jiff::Timestamp,
    /// Validity end.
    pub not_after: jiff::Timestamp,
    /// Serial, lower-case hex.
    pub serial: String,
    /// SHA-256 of the DER, lower-case hex.
    pub sha256: String,
    /// CA flag of basic constraints.
    pub is_ca: bool,
    /// Subject == issuer.
    pub self_signed: bool,
    /// Signature algorithm name.
    pub signature_algorithm: String,
    /// Public key algorithm (`RSA`, `EC`, `Ed25519`, …).
    pub public_key_algorithm: String,
}

/// Decode every `CERTIFICATE` block of a PEM input (other blocks — keys included — are ignored and
/// never kept).
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let mut out = Vec::new();
    for item in CertificateDer::pem_slice_iter(pem) {
        match item {
            Ok(der) => out.push(der),
            Err(e) => return Err(PemError::Malformed(e.to_string())),
        }
    }
    if out.is_empty() {
        return Err(PemError::NoCertificate);
    }
    Ok(out)
}

/// Decode every certificate of a PEM input.
pub fn decode_pem(pem: &[u8]) -> Result<Vec<(CertInfo, CertificateDer<'static>)>, PemError> {
    pem_certificates(pem)?
        .into_iter()
        .enumerate()
        .map(|(i, der)| decode_der(&der, i).map(|info| (info, der)))
        .collect()
}

/// Decode one DER certificate; `index` only names it in errors.
pub fn decode_der(der: &[u8], index: usize) -> Result<CertInfo, PemError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| PemError::BadDer {
        index,
        reason: e.to_string(),
    })?;
    let to_ts = |t: ASN1Time| asn1_time(t.timestamp());
    let mut dns_names = Vec::new();
    let mut ip_addresses = Vec::new();
    let mut has_san_extension = false;
    // Other SAN kinds (URI, email) are dropped: Go's `VerifyHostname` reads only DNS and IP SANs.
    // An extension that is present but empty still counts as present, as in Go's
    // `hasSANExtension`, which decides whether the "legacy Common Name" message applies.
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        has_san_extension = true;
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns_names.push(d.to_string()),
                GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_from_bytes(bytes) {
                        ip_addresses.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let is_ca = cert
        .basic_constraints()
        .ok()
        .flatten()
        .map(|b| b.value.ca)
        .unwrap_or(false);
    let subject = cert.subject().to_string();
    let issuer = cert.issuer().to_string();
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_string);
    let sig_oid = cert.signature_algorithm.algorithm.clone();
    let signature_algorithm = x509_parser::objects::oid2sn(&sig_oid, oid_registry())
        .map(str::to_string)
        .unwrap_or_else(|_| sig_oid.to_id_string());
    let pk_oid = cert.public_key().algorithm.algorithm.clone();
    // Named because `verify` picks Go's signature-failure wording by key type
    // (`crypto/rsa: verification error` vs `x509: ECDSA verification failure`).
    let public_key_algorithm = match pk_oid.to_id_string().as_str() {
        "1.2.840.113549.1.1.1" => "RSA".to_string(),
        "1.2.840.10045.2.1" => "EC".to_string(),
        "1.3.101.112" => "Ed25519".to_string(),
        other => other.to_string(),
    };
    Ok(CertInfo {
        self_signed: subject == issuer,
        subject,
        common_name,
        issuer,
        dns_names,
        ip_addresses,
        has_san_extension,
        not_before: to_ts(cert.validity().not_before),
        not_after: to_ts(cert.validity().not_after),
        serial: cert.raw_serial_as_string().replace(':', ""),
        sha256: hex(&Sha256::digest(der)),
        is_ca,
        signature_algorithm,
        public_key_algorithm,
    })
}

/// An X.509 time (seconds since the epoch, as x509-parser reads UTCTime and GeneralizedTime) as a
/// `jiff::Timestamp`, clamped to jiff's range.
///
/// RFC 5280 §4.1.2.5 gives a certificate with "no well-defined expiration date" the notAfter
/// `99991231235959Z`, which lies past jiff's maximum (9999-12-30T22:00Z). Clamping keeps it the
/// latest instant there is, so it never expires; falling back to the epoch instead would report
/// such a certificate (common for long-lived internal CAs) as expired in 1970. Go's `time.Time`
/// holds the exact value; no comparison with a collection time can tell the two apart.
fn asn1_time(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(seconds).unwrap_or(if seconds > 0 {
        jiff::Timestamp::MAX
    } else {
        jiff::Timestamp::MIN
    })
}

/// PEM text of one DER certificate.
pub fn der_to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

fn ip_from_bytes(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
