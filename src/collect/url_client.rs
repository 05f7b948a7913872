//! The HTTP client for URLs that are not the API server, named on the command line: etcd's client
//! (or metrics) port (`--etcd-metrics-url`) and a Prometheus server (`--prometheus`). Not about
//! Kubernetes Endpoints objects (those are [`super::backends`]). The API server is reached through kube's client and its kubeconfig ([`super::Fetcher`]);
//! these are reached with reqwest and the files the user names on the command line.
//!
//! Same contract as [`super::Fetcher`]: every request is bounded (`--request-timeout` for the
//! whole answer, body included; four times that for a streamed body), every body is bounded in
//! size, body loops yield after every chunk so a deadline fires however fast the chunks come,
//! failures are classified into [`FetchError`] so
//! they become gaps with a reason, and long bodies are fed line by line, never held whole. Building
//! the client reads the certificate, key, CA and token files; a file that cannot be read or parsed
//! is a [`SetupError`] naming the flag and the file — an input error, reported before anything is
//! collected.
//!
//! TLS is rustls with ring. With a CA file only that CA is trusted (like a kubeconfig's
//! `certificate-authority`); without one, the platform's roots are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::fetch::{
    BodyBuffer, BodyProgress, FetchError, LineLimits, LineSplitter, MAX_RESPONSE_BYTES, bytes_cut,
    error_chain,
};

/// A file or value given on the command line that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read or does not hold what the flag needs.
    #[error("{flag} {}: {message}", path.display())]
    File {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A flag's value is not usable (a URL without scheme, a key without a certificate).
    #[error("{flag}: {message}")]
    Value {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// A file named on the command line, with the flag that named it (to blame in errors).
pub type FlagFile = (&'static str, PathBuf);

/// The TLS and authentication files for one endpoint.
#[derive(Debug, Clone, Default)]
pub struct ClientFiles {
    /// CA bundle to trust instead of the platform roots.
    pub ca: Option<FlagFile>,
    /// Client certificate and key (mutual TLS).
    pub identity: Option<(FlagFile, FlagFile)>,
    /// A file holding a bearer token.
    pub bearer_token: Option<FlagFile>,
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, SetupError> {
    std::fs::read(path).map_err(|e| SetupError::File {
        flag,
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn pem_kinds(flag: &'static str, path: &Path, bytes: &[u8]) -> Result<Vec<String>, SetupError> {
    use rustls_pki_types::pem::{PemObject, SectionKind};
    let bad = |message: String| SetupError::File {
        flag,
        path: path.to_path_buf(),
        message,
    };
    let mut kinds = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(bytes) {
        let (kind, _) = section.map_err(|e| bad(format!("not PEM: {e}")))?;
        kinds.push(format!("{kind:?}"));
    }
    if kinds.is_empty() {
        return Err(bad("no PEM block found".into()));
    }
    Ok(kinds)
}

/// An HTTP client for one endpoint, with its deadline and credentials.
#[derive(Clone)]
pub struct UrlClient {
    client: reqwest::Client,
    request_timeout: Duration,
    bearer: Option<String>,
}

impl UrlClient {
    /// A client trusting `files.ca` (or the platform roots), presenting `files.identity`, sending
    /// the token in `files.bearer_token`; each request bounded by `request_timeout`.
    ///
    /// # Errors
    /// [`SetupError`] when a file cannot be read or is not what its flag needs.
    pub fn new(files: &ClientFiles, request_timeout: Duration) -> Result<Self, SetupError> {
        // reqwest with `rustls-no-provider` panics at build time without a process provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .tls_backend_rustls()
            .connect_timeout(request_timeout);
        if let Some((flag, path)) = &files.ca {
            let bytes = read(flag, path)?;
            pem_kinds(flag, path, &bytes)?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&bytes).map_err(|e| SetupError::File {
                    flag,
                    path: path.clone(),
                    message: format!("not a PEM certificate bundle: {}", error_chain(&e)),
                })?;
            if certs.is_empty() {
                return Err(SetupError::File {
                    flag,
                    path: path.clone(),
                    message: "no certificate in the file".into(),
                });
            }
            builder = builder.tls_certs_only(certs);
        }
        if let Some(((cert_flag, cert), (key_flag, key))) = &files.identity {
            let cert_pem = read(cert_flag, cert)?;
            let key_pem = read(key_flag, key)?;
            if !pem_kinds(cert_flag, cert, &cert_pem)?
                .iter()
                .any(|k| k == "Certificate")
            {
                return Err(SetupError::File {
                    flag: cert_flag,
                    path: cert.clone(),
                    message: "no CERTIFICATE block".into(),
                });
            }
            if !pem_kinds(key_flag, key, &key_pem)?
                .iter()
                .any(|k| k.contains("PrivateKey"))
            {
                return Err(SetupError::File {
                    flag: key_flag,
                    path: key.clone(),
                    message: "no private key block".into(),
                });
            }
            let mut both = cert_pem;
            both.push(b'\n');
            both.extend_from_slice(&key_pem);
            let identity = reqwest::Identity::from_pem(&both).map_err(|e| SetupError::File {
                flag: key_flag,
                path: key.clone(),
                message: format!("does not pair with {}: {}", cert.display(), error_chain(&e)),
            })?;
            builder = builder.identity(identity);
        }
        let bearer = match &files.bearer_token {
            Some((flag, path)) => {
                let token = String::from_utf8(read(flag, path)?).map_err(|_| SetupError::File {
                    flag,
                    path: path.clone(),
                    message: "not UTF-8 text".into(),
                })?;
                let token = token.trim().to_string();
                if token.is_empty() {
                    return Err(SetupError::File {
                        flag,
                        path: path.clone(),
                        message: "empty".into(),
                    });
                }
                Some(token)
            }
            None => None,
        };
        let client = builder.build().map_err(|e| SetupError::Value {
            flag: files.identity.as_ref().map_or("TLS", |((f, _), _)| f),
            message: error_chain(&e),
        })?;
        Ok(UrlClient {
            client,
            request_timeout,
            bearer,
        })
    }

    /// The per-request deadline.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    fn authorised(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.bearer {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, FetchError> {
        let fut = self.authorised(req).send();
        match tokio::time::timeout(self.request_timeout, fut).await {
            Err(_) => Err(FetchError::Timeout(self.request_timeout)),
            Ok(Err(e)) if e.is_timeout() => Err(FetchError::Timeout(self.request_timeout)),
            Ok(Err(e)) => Err(FetchError::Transport(error_chain(&e))),
            Ok(Ok(res)) => Ok(res),
        }
    }

    /// Send and read the whole (small) body, any status; status, body.
    ///
    /// # Errors
    /// [`FetchError::Timeout`] or [`FetchError::Transport`] when no whole answer arrived in time.
    pub async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(u16, bytes::Bytes), FetchError> {
        let progress = BodyProgress::default();
        let fut = async {
            let mut res = self.send(req).await?;
            let status = res.status().as_u16();
            progress.headers(status);
            let mut body = BodyBuffer::default();
            while let Some(chunk) = res.chunk().await.map_err(|e| progress.cut(&e))? {
                tokio::task::consume_budget().await;
                body.push(&chunk, MAX_RESPONSE_BYTES, &progress)?;
            }
            Ok((status, body.freeze()))
        };
        tokio::time::timeout(self.request_timeout, fut)
            .await
            .map_err(|_| progress.timed_out(self.request_timeout))?
    }

    /// GET a URL; any status is an answer.
    ///
    /// # Errors
    /// As [`UrlClient::exchange`].
    pub async fn get(&self, url: &str) -> Result<(u16, bytes::Bytes), FetchError> {
        self.exchange(self.client.get(url)).await
    }

    /// POST a JSON document; any status is an answer.
    ///
    /// # Errors
    /// As [`UrlClient::exchange`].
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
    ) -> Result<(u16, bytes::Bytes), FetchError> {
        let req = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string());
        self.exchange(req).await
    }

    /// POST an HTML form (`application/x-www-form-urlencoded`); any status is an answer.
    ///
    /// # Errors
    /// As [`UrlClient::exchange`].
    pub async fn post_form(
        &self,
        url: &str,
        fields: &[(&str, &str)],
    ) -> Result<(u16, bytes::Bytes), FetchError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let req = self
            .client
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.exchange(req).await
    }

    /// GET and feed the body to `on_line` one line at a time, without holding it whole, within
    /// `limits`. Non-2xx is an error.
    ///
    /// # Errors
    /// [`FetchError`] for transport failures and non-2xx statuses; [`FetchError::Cut`] at a limit;
    /// an error from `on_line` is returned as it is.
    pub async fn get_lines<F>(
        &self,
        url: &str,
        limits: LineLimits,
        mut on_line: F,
    ) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), FetchError>,
    {
        let progress = BodyProgress::default();
        let fut = async {
            let req = self
                .client
                .get(url)
                .header("accept", "text/plain;version=0.0.4, */*");
            let mut res = self.send(req).await?;
            let status = res.status().as_u16();
            progress.headers(status);
            if !(200..300).contains(&status) {
                let mut body = Vec::new();
                while let Ok(Some(chunk)) = res.chunk().await {
                    tokio::task::consume_budget().await;
                    body.extend_from_slice(&chunk);
                    if body.len() > 64 << 10 {
                        break;
                    }
                }
                return Err(FetchError::status_with_body(status, &body));
            }
            let mut lines = LineSplitter::with_max_line(limits.max_line);
            while let Some(chunk) = res.chunk().await.map_err(|e| progress.cut(&e))? {
                tokio::task::consume_budget().await;
                if progress.got(chunk.len()) > limits.max_bytes {
                    return Err(bytes_cut(limits));
                }
                lines.push(&chunk, &mut on_line)?;
            }
            lines.finish(&mut on_line)
        };
        // As for the API server's /metrics: a long body may take more than one round trip, but it
        // still has a bound.
        tokio::time::timeout(self.request_timeout * 4, fut)
            .await
            .map_err(|_| progress.timed_out(self.request_timeout * 4))?
    }
}

/// `scheme://host:port` of a URL, and `host:port`; the URL must be `http` or `https`.
///
/// # Errors
/// [`SetupError::Value`] naming `flag` when the URL is not an absolute http(s) URL.
pub fn split_url(flag: &'static str, url: &str) -> Result<(String, String), SetupError> {
    let bad = |why: &str| SetupError::Value {
        flag,
        message: format!("{url:?}: {why}"),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("expected an http:// or https:// URL"))?;
    if scheme != "http" && scheme != "https" {
        return Err(bad("expected an http:// or https:// URL"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    Ok((format!("{scheme}://{authority}"), authority.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_base_and_authority() {
        assert_eq!(
            split_url("--x", "https://10.0.0.1:2379/metrics").unwrap(),
            ("https://10.0.0.1:2379".into(), "10.0.0.1:2379".into())
        );
        assert_eq!(
            split_url("--x", "http://prom:9090").unwrap(),
            ("http://prom:9090".into(), "prom:9090".into())
        );
        let e = split_url("--x", "10.0.0.1:2379").unwrap_err().to_string();
        assert!(e.starts_with("--x: \"10.0.0.1:2379\""), "{e}");
        assert!(split_url("--x", "ftp://a/").is_err());
        assert!(split_url("--x", "http:///metrics").is_err());
    }

    #[test]
    fn unreadable_and_wrong_files_name_the_flag_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let files = ClientFiles {
            ca: Some(("--etcd-ca", missing.clone())),
            ..ClientFiles::default()
        };
        let e = UrlClient::new(&files, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(&format!("--etcd-ca {}: ", missing.display())),
            "{e}"
        );

        let text = dir.path().join("text.pem");
        std::fs::write(&text, "hello\n").unwrap();
        let files = ClientFiles {
            ca: Some(("--prometheus-ca", text.clone())),
            ..ClientFiles::default()
        };
        let e = UrlClient::new(&files, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no PEM block"), "{e}");

        let token = dir.path().join("token");
        std::fs::write(&token, "\n").unwrap();
        let files = ClientFiles {
            bearer_token: Some(("--prometheus-bearer-token-file", token)),
            ..ClientFiles::default()
        };
        let e = UrlClient::new(&files, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.ends_with(": empty"), "{e}");
    }

    #[test]
    fn a_key_that_is_a_certificate_is_refused() {
        let ca = crate::pki::generate::TestCa::new(
            "ca",
            crate::pki::generate::Validity::around(jiff::Timestamp::now(), 1, 30),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, &ca.cert_pem).unwrap();
        let files = ClientFiles {
            identity: Some((("--etcd-cert", cert.clone()), ("--etcd-key", cert.clone()))),
            ..ClientFiles::default()
        };
        let e = UrlClient::new(&files, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("--etcd-key"), "{e}");
        assert!(e.contains("no private key"), "{e}");
    }
}
