//! One real control plane: etcd, a [`DelayProxy`] in front of it, and kube-apiserver (with its
//! aggregator) on 127.0.0.1, set up as `../shared/k8s/README.md` says works without kubelet,
//! kube-proxy or controller-manager. Every process is killed when the [`ControlPlane`] drops.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::delay_proxy::DelayProxy;
use super::pki::{ClusterPki, users};
use super::{Assets, Generation, RUNTIME, Slot};
use crate::util::daemons::{Daemon, free_ports};

/// How long a kube-apiserver may take to become ready (it takes 3 s on an idle machine; two
/// starting at once on 2 cores, plus the rest of the suite, take longer).
pub const READY_LIMIT: Duration = Duration::from_secs(90);

/// A real etcd on ephemeral ports in `dir/NAME`.
pub struct Etcd {
    pub daemon: Daemon,
    pub client_port: u16,
    args: Vec<String>,
    program: PathBuf,
    dir: PathBuf,
    name: &'static str,
    /// The data directory, after the process so it goes once etcd is killed.
    _data: tempfile::TempDir,
}

impl Etcd {
    pub fn start(program: &Path, dir: &Path, name: &'static str, extra: &[String]) -> Self {
        let [client_port, peer_port] = free_ports();
        // On tmpfs where there is one: etcd fsyncs every write, and a shared CI disk's fsync tail
        // (tens of ms) is not the storage fault a test makes on purpose (the delay proxy, SIGSTOP,
        // the quota are).
        let shm = Path::new("/dev/shm");
        let data_root = if shm.is_dir() { shm } else { dir };
        let data_dir = tempfile::Builder::new()
            .prefix(&format!("extpath-{name}-"))
            .tempdir_in(data_root)
            .unwrap();
        let data = data_dir.path().to_path_buf();
        let mut args: Vec<String> = [
            format!("--name={name}"),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls=http://127.0.0.1:{client_port}"),
            format!("--advertise-client-urls=http://127.0.0.1:{client_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster={name}=http://127.0.0.1:{peer_port}"),
            "--log-level=warn".into(),
        ]
        .into();
        args.extend(extra.iter().cloned());
        let mut etcd = Etcd {
            daemon: Daemon::start_in(name, program, &args, dir),
            client_port,
            args,
            program: program.to_path_buf(),
            dir: dir.to_path_buf(),
            name,
            _data: data_dir,
        };
        etcd.wait_healthy();
        etcd
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn wait_healthy(&mut self) {
        let url = format!("{}/health", self.url());
        let http = plain_client();
        RUNTIME.block_on(self.daemon.wait_until(READY_LIMIT, || {
            let http = http.clone();
            let url = url.clone();
            async move {
                match http.get(&url).send().await {
                    Ok(r) => r.text().await.is_ok_and(|t| t.contains("true")),
                    Err(_) => false,
                }
            }
        }));
    }

    /// Kill it and start it again on the same ports and data, with `extra` flags added (e.g. a
    /// smaller `--quota-backend-bytes`).
    pub fn restart(&mut self, extra: &[String]) {
        self.daemon.signal("KILL");
        let _ = self.daemon.wait_exit();
        let mut args = self.args.clone();
        args.extend(extra.iter().cloned());
        self.daemon = Daemon::start_in(self.name, &self.program, &args, &self.dir);
        self.wait_healthy();
    }
}

/// A reqwest client for plain HTTP on loopback.
pub fn plain_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// One real control plane.
pub struct ControlPlane {
    pub generation: Generation,
    pub assets: Assets,
    pub pki: ClusterPki,
    pub etcd: Etcd,
    /// kube-apiserver reaches etcd through this; [`DelayProxy::set_delay`] makes storage slow.
    pub etcd_proxy: DelayProxy,
    kas: Daemon,
    kas_flags: Vec<String>,
    /// kube-apiserver's secure port on 127.0.0.1.
    pub port: u16,
    /// An admin kubeconfig (client certificate in `system:masters`); contexts `alice` and
    /// `flooder` are token users of the static token file.
    pub kubeconfig: PathBuf,
    /// An HTTPS client with the admin identity.
    pub admin: reqwest::Client,
    // Last: the directory goes after every process in it is killed.
    dir: tempfile::TempDir,
    _slot: Slot,
}

impl ControlPlane {
    /// Start etcd and kube-apiserver of `assets`' generation, with `extra` kube-apiserver flags,
    /// and wait (bounded) until `/readyz` answers ok.
    pub fn start(assets: &Assets, extra: &[&str]) -> Self {
        let slot = Slot::take();
        let dir = tempfile::Builder::new()
            .prefix(&format!("extpath-real-{}-", assets.generation.dir()))
            .tempdir()
            .unwrap();
        let pki = ClusterPki::new(dir.path());
        let etcd = Etcd::start(&assets.etcd, dir.path(), "etcd", &[]);
        let etcd_proxy = DelayProxy::start(format!("127.0.0.1:{}", etcd.client_port));
        let [port] = free_ports();
        let kas_flags = kube_apiserver_flags(&pki, port, etcd_proxy.port, extra);
        let kubeconfig = dir.path().join("admin.kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(&pki, port)).unwrap();
        let admin = admin_client(&pki);
        let kas = Daemon::start_in(
            "kube-apiserver",
            &assets.kube_apiserver,
            &kas_flags,
            dir.path(),
        );
        let mut cp = ControlPlane {
            generation: assets.generation,
            assets: assets.clone(),
            pki,
            etcd,
            etcd_proxy,
            kas,
            kas_flags,
            port,
            kubeconfig,
            admin,
            dir,
            _slot: slot,
        };
        cp.wait_ready();
        cp
    }

    /// The control plane's directory (certificates, kubeconfigs, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// kube-apiserver's process (for signals and its log).
    pub fn kube_apiserver(&self) -> &Daemon {
        &self.kas
    }

    fn wait_ready(&mut self) {
        let url = format!("{}/readyz", self.url());
        wait_answers_ok(&mut self.kas, &self.admin, url);
    }

    /// Stop kube-apiserver and start it again with its flags edited by `edit` (a flag changed the
    /// way an operator changes a static Pod's manifest), then wait until it is ready.
    pub fn restart_kube_apiserver(&mut self, edit: impl FnOnce(&mut Vec<String>)) {
        self.kas.signal("TERM");
        if self.kas.wait_exit_within(Duration::from_secs(30)).is_none() {
            self.kas.signal("KILL");
            let _ = self.kas.wait_exit();
        }
        edit(&mut self.kas_flags);
        self.kas = Daemon::start_in(
            "kube-apiserver",
            &self.assets.kube_apiserver,
            &self.kas_flags,
            self.dir.path(),
        );
        self.wait_ready();
    }

    /// Set (or replace) `--name=value` among kube-apiserver's flags.
    pub fn set_flag(flags: &mut Vec<String>, name: &str, value: &str) {
        let prefix = format!("--{name}=");
        flags.retain(|f| !f.starts_with(&prefix));
        flags.push(format!("{prefix}{value}"));
    }

    /// Run the real `kubectl` with the admin kubeconfig; its output whatever the exit code.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env("HOME", self.dir.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl is on PATH");
        if let Some(text) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// Run `kubectl`; panic with its stderr (and the server's log tail) unless it succeeds.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_stdin(args, None)
    }

    fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl_output(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {} failed: {}\nkube-apiserver log tail:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.kas.log_tail(30)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) -> String {
        self.kubectl_stdin(&["apply", "-f", "-"], Some(yaml))
    }

    /// `kubectl get … -o json`.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).unwrap()
    }

    /// A GET as the admin: status and body.
    pub fn raw_get(&self, path: &str) -> (u16, String) {
        let url = format!("{}{path}", self.url());
        RUNTIME.block_on(async {
            match self.admin.get(&url).send().await {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(e) => (0, e.to_string()),
            }
        })
    }

    /// A POST of a JSON `body` as the admin: status and body (0 and the error when nothing
    /// answered).
    pub fn admin_post(&self, path: &str, body: &str) -> (u16, String) {
        let url = format!("{}{path}", self.url());
        RUNTIME.block_on(async {
            match self
                .admin
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
            {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(e) => (0, e.to_string()),
            }
        })
    }

    /// A GET as a static token user (`pki::users`), without the admin's certificate: status and
    /// body.
    pub fn raw_get_as_token(&self, token: &str, path: &str) -> (u16, String) {
        let url = format!("{}{path}", self.url());
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .tls_certs_only([
                reqwest::Certificate::from_pem(self.pki.cluster_ca.pem().as_bytes()).unwrap(),
            ])
            .build()
            .unwrap();
        RUNTIME.block_on(async {
            match http.get(&url).bearer_auth(token).send().await {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(e) => (0, e.to_string()),
            }
        })
    }

    /// Poll `check` (backing off, bounded by `limit`) until it gives a value; panic naming `what`.
    pub fn poll<T>(&self, what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
        poll(what, limit, &mut check).unwrap_or_else(|| {
            panic!(
                "{what}: not within {limit:?}\nkube-apiserver log tail:\n{}",
                self.kas.log_tail(40)
            )
        })
    }
}

/// Poll `url` with `http` until it answers 2xx, failing with `daemon`'s log when it exits or
/// [`READY_LIMIT`] passes.
pub fn wait_answers_ok(daemon: &mut Daemon, http: &reqwest::Client, url: String) {
    RUNTIME.block_on(daemon.wait_until(READY_LIMIT, || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    }));
}

/// Poll `check` with backoff (20 ms up to 500 ms) until it gives a value or `limit` passes.
pub fn poll<T>(_what: &str, limit: Duration, check: &mut impl FnMut() -> Option<T>) -> Option<T> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if started.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

fn kube_apiserver_flags(
    pki: &ClusterPki,
    port: u16,
    etcd_port: u16,
    extra: &[&str],
) -> Vec<String> {
    let p = |p: &Path| p.display().to_string();
    let mut flags: Vec<String> = vec![
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        format!("--tls-cert-file={}", p(&pki.apiserver.cert)),
        format!("--tls-private-key-file={}", p(&pki.apiserver.key)),
        format!("--client-ca-file={}", p(&pki.cluster_ca.cert)),
        format!("--token-auth-file={}", p(&pki.tokens)),
        "--authorization-mode=RBAC".into(),
        format!("--service-account-key-file={}", p(&pki.service_account_pub)),
        format!(
            "--service-account-signing-key-file={}",
            p(&pki.service_account_key)
        ),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        "--service-cluster-ip-range=127.100.0.0/24".into(),
        "--endpoint-reconciler-type=none".into(),
        format!(
            "--requestheader-client-ca-file={}",
            p(&pki.front_proxy_ca.cert)
        ),
        "--requestheader-allowed-names=front-proxy-client".into(),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        format!(
            "--proxy-client-cert-file={}",
            p(&pki.front_proxy_client.cert)
        ),
        format!("--proxy-client-key-file={}", p(&pki.front_proxy_client.key)),
        "--enable-aggregator-routing=false".into(),
        "--allow-privileged=true".into(),
        // What the captures ran with: the proxy and webhook errors an engineer greps for are
        // logged at 2.
        "--v=2".into(),
    ];
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

fn kubeconfig_text(pki: &ClusterPki, port: u16) -> String {
    let token_user =
        |(name, token): (&str, &str)| format!("- name: {name}\n  user:\n    token: {token}\n");
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority: {ca}
users:
- name: admin
  user:
    client-certificate: {cert}
    client-key: {key}
{alice}{flooder}contexts:
- name: admin
  context: {{cluster: real, user: admin}}
- name: alice
  context: {{cluster: real, user: alice}}
- name: flooder
  context: {{cluster: real, user: flooder}}
current-context: admin
",
        ca = pki.cluster_ca.cert.display(),
        cert = pki.admin.cert.display(),
        key = pki.admin.key.display(),
        alice = token_user(users::ALICE),
        flooder = token_user(users::FLOODER),
    )
}

fn admin_client(pki: &ClusterPki) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = std::fs::read_to_string(&pki.admin.key).unwrap();
    reqwest::Client::builder()
        .tls_backend_rustls()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .tls_certs_only([reqwest::Certificate::from_pem(pki.cluster_ca.pem().as_bytes()).unwrap()])
        .identity(
            reqwest::Identity::from_pem(format!("{}\n{key}", pki.admin.cert_pem).as_bytes())
                .unwrap(),
        )
        .build()
        .unwrap()
}
