//! Certificates as evidence: who issued them, for which names, valid when, and did they verify.
//!
//! Only public certificates are kept (never keys). Decoding and verification live in [`crate::pki`];
//! this file is the serialised shape and the glue that turns a decoded certificate into bundle form.
//! Verifying a live collection's served chains is a collection step (`crate::collect::tls`), not a
//! method of the model; [`Verification`] is where its outcome is kept.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ObjectRef;

/// Where a certificate was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CertSource {
    /// Decoded from a `caBundle` field (APIService, webhook, CRD conversion webhook).
    CaBundle,
    /// Presented by a server during a TLS handshake (position in `chain_index`).
    ServedChain,
    /// A PEM file supplied by the user.
    File,
}

/// Where a certificate came from and which object it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CertOrigin {
    /// caBundle, served chain or file.
    pub source: CertSource,
    /// The object whose caBundle or backend this is (APIService, ValidatingWebhook, …), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ObjectRef>,
    /// The file it was read from (raw import).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `host:port` it was served from (served chains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Position in the chain or bundle (0 = leaf for a served chain).
    #[serde(default)]
    pub chain_index: usize,
}

/// The outcome of verifying a served chain against the trust it is supposed to chain to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// What the chain was verified against, e.g. `caBundle of APIService/v1beta1.metrics.k8s.io`.
    pub trust: String,
    /// The server name checked, e.g. `metrics-server.kube-system.svc`.
    pub server_name: String,
    /// `true` when the chain verified for that name.
    pub ok: bool,
    /// On failure, the reason in the words Go's crypto/x509 uses
    /// (`x509: certificate signed by unknown authority`, …) so that it can be compared with what
    /// the API server printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The time the verification was judged at (the bundle's collection time).
    pub at: jiff::Timestamp,
}

/// One X.509 certificate, public parts only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    /// Where it came from.
    pub origin: CertOrigin,
    /// Subject DN, RFC 4514 style (`CN=wardle-ca`).
    pub subject: String,
    /// Issuer DN.
    pub issuer: String,
    /// DNS SANs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// IP SANs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Validity start.
    pub not_before: jiff::Timestamp,
    /// Validity end.
    pub not_after: jiff::Timestamp,
    /// Serial number, hex.
    pub serial: String,
    /// SHA-256 of the DER encoding, hex.
    pub sha256: String,
    /// Basic constraints CA flag.
    #[serde(default)]
    pub is_ca: bool,
    /// Subject equals issuer.
    #[serde(default)]
    pub self_signed: bool,
    /// Signature algorithm (`sha256WithRSAEncryption`, `ecdsa-with-SHA256`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature_algorithm: String,
    /// Result of verifying the chain this certificate leads (served leaf only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The certificate itself, PEM (public data): lets a bundle be re-verified offline and replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pem: Option<String>,
}

impl Certificate {
    /// Build the bundle form from a decoded certificate.
    pub fn from_info(info: crate::pki::CertInfo, origin: CertOrigin) -> Self {
        Certificate {
            origin,
            subject: info.subject,
            issuer: info.issuer,
            dns_names: info.dns_names,
            ip_addresses: info.ip_addresses,
            not_before: info.not_before,
            not_after: info.not_after,
            serial: info.serial,
            sha256: info.sha256,
            is_ca: info.is_ca,
            self_signed: info.self_signed,
            signature_algorithm: info.signature_algorithm,
            verification: None,
            pem: None,
        }
    }

    /// Keep the certificate's DER, as PEM, beside its summary.
    pub fn with_der(mut self, der: &[u8]) -> Self {
        self.pem = Some(crate::pki::der_to_pem(der));
        self
    }

    /// The DER of the certificate, when the bundle kept it.
    pub fn der(&self) -> Option<rustls_pki_types::CertificateDer<'static>> {
        let pem = self.pem.as_deref()?;
        crate::pki::pem_certificates(pem.as_bytes())
            .ok()?
            .into_iter()
            .next()
    }

    /// Whether the certificate is valid at `at`.
    pub fn valid_at(&self, at: jiff::Timestamp) -> bool {
        self.not_before <= at && at <= self.not_after
    }
}
