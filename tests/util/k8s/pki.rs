//! The certificates of one real control plane, from the project's own `pki::generate`, written as
//! files the binaries read. Validity is around the real clock: kube-apiserver, the
//! sample-apiserver and Go's TLS stack check certificates against it, so a fault that needs an
//! expired certificate issues one with [`Validity::expired_at`] now.

use std::path::{Path, PathBuf};

use extpath::pki::generate::{Issued, LeafSpec, TestCa, Validity};

/// A certificate and its key as files.
#[derive(Debug, Clone)]
pub struct KeyPairFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_pem: String,
}

/// A CA as a file, able to issue more leaves.
pub struct Authority {
    pub ca: TestCa,
    pub cert: PathBuf,
    dir: PathBuf,
}

impl Authority {
    fn new(dir: &Path, name: &str) -> Self {
        let ca = TestCa::new(name, valid_now()).unwrap();
        let cert = dir.join(format!("{name}.crt"));
        std::fs::write(&cert, &ca.cert_pem).unwrap();
        Authority {
            ca,
            cert,
            dir: dir.to_path_buf(),
        }
    }

    /// The CA certificate's PEM (what goes into a caBundle).
    pub fn pem(&self) -> &str {
        &self.ca.cert_pem
    }

    /// Issue `spec` and write it as `file.crt` / `file.key`.
    pub fn issue(&self, file: &str, spec: &LeafSpec) -> KeyPairFiles {
        write_pair(&self.dir, file, self.ca.issue(spec).unwrap())
    }

    /// A serving certificate for `names`, valid now.
    pub fn serving(&self, file: &str, names: &[&str]) -> KeyPairFiles {
        self.issue(file, &LeafSpec::server(names, valid_now()))
    }
}

fn write_pair(dir: &Path, file: &str, issued: Issued) -> KeyPairFiles {
    let cert = dir.join(format!("{file}.crt"));
    let key = dir.join(format!("{file}.key"));
    std::fs::write(&cert, &issued.cert_pem).unwrap();
    std::fs::write(&key, &issued.key_pem).unwrap();
    KeyPairFiles {
        cert,
        key,
        cert_pem: issued.cert_pem,
    }
}

/// Valid from a day ago for a year (past every expiry warning).
pub fn valid_now() -> Validity {
    Validity::around(jiff::Timestamp::now(), 1, 365)
}

/// The user names of the static token file, and their tokens.
pub mod users {
    /// The sample-apiserver's own identity (delegated authn/authz, its informers).
    pub const EXTENSION: (&str, &str) = ("wardle-apiserver", "extension-token");
    /// An ordinary user of the aggregated API (group `wardle-users`).
    pub const ALICE: (&str, &str) = ("alice", "alice-token");
    /// A client that floods (group `flooders`): the APF faults classify it on its own level.
    pub const FLOODER: (&str, &str) = ("flooder", "flooder-token");
}

/// Everything the control plane needs.
pub struct ClusterPki {
    pub cluster_ca: Authority,
    pub apiserver: KeyPairFiles,
    pub admin: KeyPairFiles,
    pub front_proxy_ca: Authority,
    pub front_proxy_client: KeyPairFiles,
    /// The service-account signing key (PKCS#8) and its public half.
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub tokens: PathBuf,
    /// The CA of extension and webhook serving certificates.
    pub backends_ca: Authority,
}

impl ClusterPki {
    pub fn new(dir: &Path) -> Self {
        let cluster_ca = Authority::new(dir, "cluster-ca");
        let apiserver = cluster_ca.serving(
            "apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ],
        );
        let admin = cluster_ca.issue(
            "admin",
            &LeafSpec::client("extpath-test-admin", &["system:masters"], valid_now()),
        );
        let front_proxy_ca = Authority::new(dir, "front-proxy-ca");
        let front_proxy_client = front_proxy_ca.issue(
            "front-proxy-client",
            &LeafSpec::client("front-proxy-client", &[], valid_now()),
        );
        let key = rcgen::KeyPair::generate().unwrap();
        let service_account_key = dir.join("sa.key");
        std::fs::write(&service_account_key, key.serialize_pem()).unwrap();
        let service_account_pub = dir.join("sa.pub");
        std::fs::write(&service_account_pub, key.public_key_pem()).unwrap();
        let tokens = dir.join("tokens.csv");
        std::fs::write(
            &tokens,
            format!(
                "{t},{u},{u}-uid\n{at},{a},{a}-uid,\"wardle-users\"\n{ft},{f},{f}-uid,\"flooders\"\n",
                u = users::EXTENSION.0,
                t = users::EXTENSION.1,
                a = users::ALICE.0,
                at = users::ALICE.1,
                f = users::FLOODER.0,
                ft = users::FLOODER.1,
            ),
        )
        .unwrap();
        let backends_ca = Authority::new(dir, "backends-ca");
        ClusterPki {
            cluster_ca,
            apiserver,
            admin,
            front_proxy_ca,
            front_proxy_client,
            service_account_key,
            service_account_pub,
            tokens,
            backends_ca,
        }
    }
}

/// The DER inside a PEM block (a PKCS#8 key as rcgen writes it).
pub fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

/// A rustls client configuration with the admin identity, trusting the cluster CA and the backends
/// CA (kube-apiserver's and the extension's serving certificates), offering `alpn`.
pub fn client_tls(pki: &ClusterPki, alpn: &[&str]) -> rustls::ClientConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for pem in [pki.cluster_ca.pem(), pki.backends_ca.pem()] {
        for c in extpath::pki::pem_certificates(pem.as_bytes()).unwrap() {
            roots.add(c).unwrap();
        }
    }
    let chain = extpath::pki::pem_certificates(pki.admin.cert_pem.as_bytes()).unwrap();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(rustls_pki_types::PrivatePkcs8KeyDer::from(
        pem_der(&std::fs::read_to_string(&pki.admin.key).unwrap()),
    ));
    let mut cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    cfg
}
