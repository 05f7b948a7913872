//! The reference server's PKI, generated at start: its serving CA and certificate, the client CA
//! that user certificates chain to, the front-proxy CA and the aggregator's proxy client certificate,
//! the scenario's named CAs, and backend serving certificates from their specs.
//!
//! Two clocks matter. Certificates that real clients verify against the wall clock (the server's
//! own serving certificate, user client certificates, the front-proxy client certificate) get a
//! validity of ten years either side of the scenario clock, so they work whatever the date. Backend
//! certificates follow their spec relative to the scenario clock, and the server verifies them at the
//! scenario clock too, so "expired" is expired forever and the messages are deterministic.

use std::collections::BTreeMap;

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::pki::generate::{Issued, LeafSpec, TestCa, Validity};

use super::scenario::{CertSpec, Scenario, ValiditySpec};

/// A certificate chain with its key, ready for rustls.
pub struct KeyedCert {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// PEM of the leaf.
    pub cert_pem: String,
    /// PKCS#8 PEM of the key.
    pub key_pem: String,
    key_der: Vec<u8>,
}

impl KeyedCert {
    /// The key for rustls.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

impl std::fmt::Debug for KeyedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedCert").finish_non_exhaustive()
    }
}

impl From<Issued> for KeyedCert {
    fn from(i: Issued) -> Self {
        let key = i.key_der();
        let key_der = key.secret_der().to_vec();
        KeyedCert {
            chain: vec![i.cert_der.clone()],
            cert_pem: i.cert_pem,
            key_pem: i.key_pem,
            key_der,
        }
    }
}

/// Everything generated at start.
pub struct ServerPki {
    /// CA of the serving certificate (what the kubeconfig trusts).
    pub serving_ca: TestCa,
    /// The server's serving certificate (127.0.0.1, localhost).
    pub serving: KeyedCert,
    /// CA that client certificates chain to (`--client-ca-file`).
    pub client_ca: TestCa,
    /// Front-proxy CA (`--requestheader-client-ca-file` of extension servers).
    pub front_proxy_ca: TestCa,
    /// The aggregator's proxy client certificate (CN `front-proxy-client`).
    pub front_proxy_client: KeyedCert,
    /// The scenario's named CAs.
    pub cas: BTreeMap<String, TestCa>,
    /// Client certificates of users that asked for one.
    pub user_certs: BTreeMap<String, KeyedCert>,
    /// The scenario clock.
    pub clock: jiff::Timestamp,
}

impl std::fmt::Debug for ServerPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerPki").finish_non_exhaustive()
    }
}

fn wide(clock: jiff::Timestamp) -> Validity {
    Validity::around(clock, 3650, 3650)
}

impl ServerPki {
    /// Generate the PKI for a scenario.
    ///
    /// # Errors
    /// When rcgen fails.
    pub fn generate(scenario: &Scenario) -> Result<Self, rcgen::Error> {
        let clock = scenario.clock();
        let serving_ca = TestCa::new("extpath-refserver-ca", wide(clock))?;
        let serving = serving_ca
            .issue(&LeafSpec::server(
                &[
                    "localhost",
                    "kubernetes",
                    "kubernetes.default.svc",
                    "127.0.0.1",
                ],
                wide(clock),
            ))?
            .into();
        let client_ca = TestCa::new("extpath-refserver-client-ca", wide(clock))?;
        let front_proxy_ca = TestCa::new("front-proxy-ca", wide(clock))?;
        let front_proxy_client = front_proxy_ca
            .issue(&LeafSpec::client("front-proxy-client", &[], wide(clock)))?
            .into();
        let mut cas = BTreeMap::new();
        for name in &scenario.cas {
            cas.insert(name.clone(), TestCa::new(name, wide(clock))?);
        }
        let mut user_certs = BTreeMap::new();
        let admin_groups = ["system:masters"];
        user_certs.insert(
            "admin".to_string(),
            client_ca
                .issue(&LeafSpec::client("admin", &admin_groups, wide(clock)))?
                .into(),
        );
        for u in scenario.users.iter().filter(|u| u.client_certificate) {
            let groups: Vec<&str> = u.groups.iter().map(String::as_str).collect();
            user_certs.insert(
                u.name.clone(),
                client_ca
                    .issue(&LeafSpec::client(&u.name, &groups, wide(clock)))?
                    .into(),
            );
        }
        Ok(ServerPki {
            serving_ca,
            serving,
            client_ca,
            front_proxy_ca,
            front_proxy_client,
            cas,
            user_certs,
            clock,
        })
    }

    /// Issue a backend serving certificate from its spec.
    ///
    /// # Errors
    /// When rcgen fails or the issuer is unknown.
    pub fn issue_backend(&self, spec: &CertSpec) -> Result<KeyedCert, rcgen::Error> {
        let validity = match spec.validity {
            ValiditySpec::Valid => Validity::around(self.clock, 30, 3650),
            ValiditySpec::Expired => Validity::expired_at(self.clock),
            ValiditySpec::NotYetValid => Validity::not_yet_valid_at(self.clock),
        };
        let names: Vec<&str> = spec.names.iter().map(String::as_str).collect();
        if spec.issuer == "selfSigned" {
            return self_signed(&names, validity);
        }
        let ca = self.cas.get(&spec.issuer).ok_or_else(|| {
            rcgen::Error::InvalidAsn1String(rcgen::InvalidAsn1String::PrintableString(format!(
                "unknown CA {}",
                spec.issuer
            )))
        })?;
        Ok(ca.issue(&LeafSpec::server(&names, validity))?.into())
    }

    /// The PEM a `${ca:NAME}` reference stands for.
    pub fn ca_pem(&self, name: &str) -> Option<&str> {
        self.cas.get(name).map(|c| c.cert_pem.as_str())
    }
}

fn to_offset(t: jiff::Timestamp) -> Result<time::OffsetDateTime, rcgen::Error> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second()).map_err(|_| {
        rcgen::Error::InvalidAsn1String(rcgen::InvalidAsn1String::PrintableString(
            "timestamp out of range".into(),
        ))
    })
}

/// A real self-signed leaf (issuer = subject, not a CA): what a careless backend serves.
fn self_signed(names: &[&str], validity: Validity) -> Result<KeyedCert, rcgen::Error> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("server"),
    );
    params.distinguished_name = dn;
    for n in names {
        match n.parse::<std::net::IpAddr>() {
            Ok(ip) => params.subject_alt_names.push(SanType::IpAddress(ip)),
            Err(_) => params
                .subject_alt_names
                .push(SanType::DnsName((*n).try_into()?)),
        }
    }
    params.not_before = to_offset(validity.not_before)?;
    params.not_after = to_offset(validity.not_after)?;
    params
        .extended_key_usages
        .push(rcgen::ExtendedKeyUsagePurpose::ServerAuth);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(KeyedCert {
        chain: vec![cert.der().clone()],
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        key_der: key.serialize_der(),
    })
}
