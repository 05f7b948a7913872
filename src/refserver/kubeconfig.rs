//! The kubeconfig real clients use to reach a running reference server: the server URL, the serving
//! CA as `certificate-authority-data`, and the admin's bearer token — or, with `ClientAuth::Cert`,
//! the admin's client certificate and key. It holds credentials, so it is written only where the
//! user asks (`--kubeconfig-out`) or printed.

use base64::Engine;

/// How the kubeconfig authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Bearer token.
    Token,
    /// Client certificate.
    Cert,
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Render a kubeconfig.
pub fn render(server: &str, ca_pem: &str, token: &str, cert: Option<(&str, &str)>) -> String {
    let user = match cert {
        Some((cert_pem, key_pem)) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert_pem),
            b64(key_pem)
        ),
        None => format!("    token: {token}\n"),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: extpath-replay\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n{user}contexts:\n- name: extpath-replay\n  context:\n    cluster: extpath-replay\n    user: admin\n    namespace: default\ncurrent-context: extpath-replay\n",
        b64(ca_pem)
    )
}
