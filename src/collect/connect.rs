//! From kubectl-style connection options to a `kube::Client`.
//!
//! The flags mirror kubectl's (`genericclioptions`): a kubeconfig file or the `KUBECONFIG` list,
//! context/cluster/user selection, server and CA overrides, bearer token, client certificate,
//! impersonation, `--insecure-skip-tls-verify`. In-cluster service-account configuration is used when
//! no kubeconfig exists and the pod environment is present. Exec credential plugins and
//! `HTTPS_PROXY`/`NO_PROXY` are handled by kube itself, the same way kubectl handles them.
//!
//! One deliberate difference from kube's defaults: the client's automatic retry of 429/503/504 is
//! turned off. A diagnosis tool must see the 429 the API server sent, not the 200 of a later retry —
//! the real captures show kubectl hiding ten APF rejections this way.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// How to reach the API server, as the user gave it.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--user`.
    pub user: Option<String>,
    /// `-s/--server`.
    pub server: Option<String>,
    /// `--certificate-authority`.
    pub certificate_authority: Option<PathBuf>,
    /// `--client-certificate`.
    pub client_certificate: Option<PathBuf>,
    /// `--client-key`.
    pub client_key: Option<PathBuf>,
    /// `--token`.
    pub token: Option<String>,
    /// `--tls-server-name`.
    pub tls_server_name: Option<String>,
    /// `--insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// `--as`.
    pub impersonate: Option<String>,
    /// `--as-group`.
    pub impersonate_groups: Vec<String>,
    /// `--as-uid`.
    pub impersonate_uid: Option<String>,
    /// `-n/--namespace`.
    pub namespace: Option<String>,
    /// `--request-timeout`: per request.
    pub request_timeout: Duration,
    /// Use only these options: no kubeconfig, no in-cluster configuration, no proxy from the
    /// environment (for clients of the bundled reference server, which must not pick up the
    /// user's cluster). Needs `server`.
    pub isolated: bool,
}

/// A connected client and what it is connected to.
#[derive(Clone)]
pub struct Connection {
    /// The client (retries off).
    pub client: kube::Client,
    /// The server URL.
    pub server: String,
    /// The context used, when a kubeconfig was used.
    pub context: Option<String>,
    /// The namespace to use for namespaced probes.
    pub namespace: String,
    /// The configuration the client was built from (for TLS settings reused by probes).
    pub config: kube::Config,
    /// Who the requests are sent as, in words for messages: `user "admin"`, `user "alice"
    /// (impersonated)`, `the pod's service account`.
    pub identity: String,
    /// The user name kube-apiserver authenticates the requests as, when the credentials
    /// themselves say it ([`credential_user`]); `None` when only the server knows (an exec
    /// plugin's or OIDC token, a static token).
    pub user: Option<String>,
}

/// The user name these credentials are authenticated as, when they say it themselves: the user
/// impersonated (`--as`), else a client certificate's common name (the x509 authenticator's user
/// name), else a service account token's `sub` (`system:serviceaccount:NS:NAME`, the JWT claim the
/// service-account authenticator maps to the user name; read, not verified). Used to tell a 403 for
/// the sender from one for somebody else.
pub fn credential_user(
    config: &kube::Config,
    impersonate: Option<&str>,
    token: Option<&str>,
) -> Option<String> {
    use base64::Engine;
    if let Some(u) = impersonate {
        return Some(u.to_string());
    }
    let a = &config.auth_info;
    let pem = match (&a.client_certificate_data, &a.client_certificate) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok(),
        (None, Some(path)) => std::fs::read(path).ok(),
        (None, None) => None,
    };
    if let Some(cn) = pem
        .as_deref()
        .and_then(|p| crate::pki::decode_pem(p).ok())
        .and_then(|certs| certs.into_iter().next())
        .and_then(|(info, _)| info.common_name)
    {
        return Some(cn);
    }
    let token = match token {
        Some(t) => Some(t.to_string()),
        None => a
            .token_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok()),
    }?;
    let payload = token.trim().split('.').nth(1)?;
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?,
    )
    .ok()?;
    claims["sub"]
        .as_str()
        .filter(|s| s.starts_with("system:serviceaccount:"))
        .map(str::to_string)
}

/// Why a client could not be configured. These are input errors (exit 2), not unreachable clusters.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No kubeconfig found and not running in a cluster.
    #[error(
        "no kubeconfig found (tried --kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster"
    )]
    NoConfig,
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// A file named by a flag could not be read.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The client could not be built.
    #[error("building the client: {0}")]
    Client(String),
}

fn kubeconfig_error(e: impl std::fmt::Display) -> ConnectError {
    ConnectError::Kubeconfig(e.to_string())
}

fn read_file(path: &PathBuf) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|e| ConnectError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The service-account directory of a pod; `EXTPATH_SERVICEACCOUNT_DIR` overrides it (tests, and
/// sidecars that mount the token elsewhere).
fn service_account_dir() -> PathBuf {
    std::env::var_os("EXTPATH_SERVICEACCOUNT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount"))
}

/// In-cluster configuration, as client-go's `rest.InClusterConfig`: `KUBERNETES_SERVICE_HOST` and
/// `_PORT`, the mounted CA and namespace, and the token file (re-read by kube as it rotates).
fn in_cluster() -> Result<kube::Config, ConnectError> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| ConnectError::NoConfig)?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").map_err(|_| ConnectError::NoConfig)?;
    let dir = service_account_dir();
    let token = dir.join("token");
    if !token.exists() {
        return Err(ConnectError::File {
            path: token.display().to_string(),
            reason: "in-cluster configuration needs the service account token".into(),
        });
    }
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let uri = format!("https://{host}:{port}")
        .parse()
        .map_err(|e| ConnectError::Kubeconfig(format!("in-cluster server: {e}")))?;
    let mut config = kube::Config::new(uri);
    let ca = dir.join("ca.crt");
    let pem = read_file(&ca)?;
    let ders = crate::pki::pem_certificates(&pem).map_err(|e| ConnectError::File {
        path: ca.display().to_string(),
        reason: e.to_string(),
    })?;
    config.root_cert = Some(ders.into_iter().map(|d| d.to_vec()).collect());
    config.auth_info.token_file = Some(token.display().to_string());
    if let Ok(ns) = std::fs::read_to_string(dir.join("namespace")) {
        config.default_namespace = ns.trim().to_string();
    }
    Ok(config)
}

/// `$KUBECONFIG` as kubectl reads it: a path list, merged in order, files that do not exist skipped.
fn from_env_list() -> Result<Option<Kubeconfig>, ConnectError> {
    let Some(list) = std::env::var_os("KUBECONFIG") else {
        return Ok(None);
    };
    let mut merged: Option<Kubeconfig> = None;
    for path in std::env::split_paths(&list) {
        if path.as_os_str().is_empty() || !path.exists() {
            continue;
        }
        let next = Kubeconfig::read_from(&path).map_err(kubeconfig_error)?;
        merged = Some(match merged {
            Some(m) => m.merge(next).map_err(kubeconfig_error)?,
            None => next,
        });
    }
    Ok(merged)
}

/// The kubeconfig user a context uses, for messages.
fn context_user(kc: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let name = context?;
    kc.contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
        .filter(|u| !u.is_empty())
}

async fn base_config(
    opts: &ConnectOptions,
) -> Result<(kube::Config, Option<String>, String), ConnectError> {
    let kc_opts = KubeConfigOptions {
        context: opts.context.clone(),
        cluster: opts.cluster.clone(),
        user: opts.user.clone(),
    };
    if opts.isolated {
        let server = opts.server.as_deref().ok_or(ConnectError::NoConfig)?;
        let uri = server
            .parse()
            .map_err(|e| ConnectError::Kubeconfig(format!("--server {server:?}: {e}")))?;
        return Ok((kube::Config::new(uri), None, "the given credentials".into()));
    }
    let kubeconfig = if let Some(path) = &opts.kubeconfig {
        Some(Kubeconfig::read_from(path).map_err(kubeconfig_error)?)
    } else {
        from_env_list()?.or_else(|| Kubeconfig::read().ok())
    };
    match kubeconfig {
        Some(kc) => {
            let context = opts.context.clone().or_else(|| kc.current_context.clone());
            let user = opts
                .user
                .clone()
                .or_else(|| context_user(&kc, context.as_deref()));
            let identity = match (&user, &context) {
                (Some(u), Some(c)) => format!("user {u:?} of context {c:?}"),
                (Some(u), None) => format!("user {u:?}"),
                (None, Some(c)) => format!("the credentials of context {c:?}"),
                (None, None) => "the kubeconfig's credentials".into(),
            };
            let config = kube::Config::from_custom_kubeconfig(kc, &kc_opts)
                .await
                .map_err(kubeconfig_error)?;
            Ok((config, context, identity))
        }
        None => {
            if let Some(server) = &opts.server {
                let uri = server
                    .parse()
                    .map_err(|e| ConnectError::Kubeconfig(format!("--server {server:?}: {e}")))?;
                return Ok((kube::Config::new(uri), None, "no credentials".into()));
            }
            in_cluster().map(|c| (c, None, "the pod's service account".into()))
        }
    }
}

/// A context of the kubeconfig, with the server of its cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedContext {
    /// The context's name.
    pub name: String,
    /// Its cluster's `server`, when the kubeconfig has one.
    pub server: Option<String>,
}

/// The contexts of the kubeconfig the options name (`--kubeconfig`, else the `$KUBECONFIG` list,
/// else `~/.kube/config`), in the file's order — what `kubectl config get-contexts` lists, read
/// locally without connecting.
///
/// # Errors
/// [`ConnectError::NoConfig`] when there is no kubeconfig, [`ConnectError::Kubeconfig`] when it
/// cannot be read.
pub fn kubeconfig_contexts(opts: &ConnectOptions) -> Result<Vec<NamedContext>, ConnectError> {
    let kc = match &opts.kubeconfig {
        Some(path) => Kubeconfig::read_from(path).map_err(kubeconfig_error)?,
        None => match from_env_list()? {
            Some(kc) => kc,
            None => Kubeconfig::read().map_err(|_| ConnectError::NoConfig)?,
        },
    };
    Ok(kc
        .contexts
        .iter()
        .map(|c| {
            let cluster = opts.cluster.clone().or_else(|| {
                c.context
                    .as_ref()
                    .map(|ctx| ctx.cluster.clone())
                    .filter(|n| !n.is_empty())
            });
            let server = opts.server.clone().or_else(|| {
                kc.clusters
                    .iter()
                    .find(|n| Some(&n.name) == cluster.as_ref())
                    .and_then(|n| n.cluster.as_ref())
                    .and_then(|c| c.server.clone())
            });
            NamedContext {
                name: c.name.clone(),
                server: server.map(|s| s.trim_end_matches('/').to_string()),
            }
        })
        .collect())
}

/// Build a client from the options.
///
/// # Errors
/// [`ConnectError`] when the configuration is missing or unusable. Reachability is not tested here.
pub async fn connect(opts: &ConnectOptions) -> Result<Connection, ConnectError> {
    let (mut config, context, mut identity) = base_config(opts).await?;
    if let Some(server) = &opts.server {
        config.cluster_url = server
            .parse()
            .map_err(|e| ConnectError::Kubeconfig(format!("--server {server:?}: {e}")))?;
    }
    if let Some(ca) = &opts.certificate_authority {
        let pem = read_file(ca)?;
        let ders = crate::pki::pem_certificates(&pem).map_err(|e| ConnectError::File {
            path: ca.display().to_string(),
            reason: e.to_string(),
        })?;
        config.root_cert = Some(ders.into_iter().map(|d| d.to_vec()).collect());
    }
    if let Some(cert) = &opts.client_certificate {
        config.auth_info.client_certificate = Some(cert.display().to_string());
        config.auth_info.client_certificate_data = None;
    }
    if let Some(key) = &opts.client_key {
        config.auth_info.client_key = Some(key.display().to_string());
        config.auth_info.client_key_data = None;
    }
    if let Some(token) = &opts.token {
        identity = "the --token credentials".into();
        config.auth_info.token = Some(token.clone().into());
        config.auth_info.token_file = None;
    }
    if let Some(name) = &opts.tls_server_name {
        config.tls_server_name = Some(name.clone());
    }
    if opts.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
        config.root_cert = None;
    }
    if let Some(user) = &opts.impersonate {
        identity = format!("user {user:?} (impersonated by {identity})");
        config.auth_info.impersonate = Some(user.clone());
    }
    if !opts.impersonate_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(opts.impersonate_groups.clone());
    }
    if let Some(uid) = &opts.impersonate_uid {
        config.auth_info.impersonate_uid = Some(uid.clone());
    }
    if let Some(ns) = &opts.namespace {
        config.default_namespace = ns.clone();
    }
    if !opts.request_timeout.is_zero() {
        // Only the connect timeout: kube's read/write timeouts apply to the connection, not to a
        // request, so an HTTP/2 connection idle for longer (while etcd times out, or during the
        // metrics window) would die under the next request. The Fetcher bounds every request.
        config.connect_timeout = Some(opts.request_timeout);
    }
    config.default_retry = false;
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let namespace = config.default_namespace.clone();
    let user = credential_user(&config, opts.impersonate.as_deref(), opts.token.as_deref());
    let client =
        kube::Client::try_from(config.clone()).map_err(|e| ConnectError::Client(e.to_string()))?;
    Ok(Connection {
        client,
        server,
        context,
        namespace,
        config,
        identity,
        user,
    })
}

#[cfg(test)]
mod credential_tests {
    use super::credential_user;
    use base64::Engine;

    fn config() -> kube::Config {
        kube::Config::new("https://127.0.0.1:6443".parse().unwrap())
    }

    #[test]
    fn the_credentials_name_their_user_when_they_can() {
        // --as wins: kube-apiserver authorizes the impersonated user.
        assert_eq!(
            credential_user(&config(), Some("alice"), None).as_deref(),
            Some("alice")
        );
        // A client certificate: its common name.
        let ca = crate::pki::generate::TestCa::new(
            "ca",
            crate::pki::generate::Validity::around(jiff::Timestamp::now(), 1, 1),
        )
        .unwrap();
        let leaf = ca
            .issue(&crate::pki::generate::LeafSpec::client(
                "extpath-test-admin",
                &["system:masters"],
                crate::pki::generate::Validity::around(jiff::Timestamp::now(), 1, 1),
            ))
            .unwrap();
        let mut c = config();
        c.auth_info.client_certificate_data =
            Some(base64::engine::general_purpose::STANDARD.encode(&leaf.cert_pem));
        assert_eq!(
            credential_user(&c, None, None).as_deref(),
            Some("extpath-test-admin")
        );
        // A service account token: its subject (read, not verified).
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:extpath:extpath"}"#);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{claims}.c2ln");
        assert_eq!(
            credential_user(&config(), None, Some(&token)).as_deref(),
            Some("system:serviceaccount:extpath:extpath")
        );
        // An opaque token says nothing.
        assert_eq!(credential_user(&config(), None, Some("alice-token")), None);
    }
}
