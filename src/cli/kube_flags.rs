//! The kubectl connection flags every live command shares (`collect`, `scan`, `why`), with
//! kubectl's names and meanings (cli-runtime `genericclioptions`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::collect::ConnectOptions;

/// kubectl's global connection flags.
#[derive(Debug, Clone, Args)]
pub struct KubeFlags {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated,
    /// scan them as a fleet).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The name of the kubeconfig cluster to use.
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// The address and port of the Kubernetes API server.
    #[arg(short = 's', long, global = true)]
    pub server: Option<String>,
    /// Path to a cert file for the certificate authority.
    #[arg(long, value_name = "FILE", global = true)]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS.
    #[arg(long, value_name = "FILE", global = true)]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS.
    #[arg(long, value_name = "FILE", global = true)]
    pub client_key: Option<PathBuf>,
    /// Bearer token for authentication to the API server.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// Server name to use for server certificate validation.
    #[arg(long, global = true)]
    pub tls_server_name: Option<String>,
    /// If true, the server's certificate will not be checked for validity.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Username to impersonate for the operation.
    #[arg(long = "as", value_name = "USER", global = true)]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation (repeatable).
    #[arg(long = "as-group", value_name = "GROUP", global = true)]
    pub as_group: Vec<String>,
    /// UID to impersonate for the operation.
    #[arg(long = "as-uid", value_name = "UID", global = true)]
    pub as_uid: Option<String>,
    /// The namespace scope for namespaced probes.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h).
    // kubectl's default is "0", no timeout (cli-runtime `config_flags.go`, REFERENCE §5). Here it
    // is 10 s because the tool runs during incidents against servers that hang, and one hung read
    // must not hold the whole scan (DESIGN §5: a hung server cannot hang the tool).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, global = true)]
    pub request_timeout: Duration,
}

impl KubeFlags {
    /// The collection layer's view of these flags.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
            server: self.server.clone(),
            certificate_authority: self.certificate_authority.clone(),
            client_certificate: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            token: self.token.clone(),
            tls_server_name: self.tls_server_name.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            impersonate: self.as_user.clone(),
            impersonate_groups: self.as_group.clone(),
            impersonate_uid: self.as_uid.clone(),
            namespace: self.namespace.clone(),
            request_timeout: self.request_timeout,
            isolated: false,
        }
    }
}

/// kubectl's duration syntax: `0`, or a number with a unit (`ms`, `s`, `m`, `h`), combinable
/// (`1m30s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{s:?}: a duration needs a unit (e.g. 1s, 2m, 3h)"))?;
        if digits == 0 {
            return Err(format!("{s:?}: expected a number"));
        }
        let n: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{s:?}: bad number"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ms" => n / 1000.0,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            other => return Err(format!("{s:?}: unknown unit {other:?} (use ms, s, m or h)")),
        };
        total += Duration::from_secs_f64(secs);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_durations() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("1d").is_err());
    }
}
