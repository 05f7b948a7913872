//! The upstream sample-apiserver (group `wardle.example.com`) as an aggregated API of a real
//! control plane: its own etcd, its own identity (a static token user with the delegation RBAC an
//! extension server needs), an `ExternalName` Service pointing at `localhost` and its real port
//! (there is no kube-proxy; the aggregator dials the external name), and the APIService
//! `v1alpha1.wardle.example.com` whose `caBundle` is the CA of its serving certificate.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;

use super::RUNTIME;
use super::control_plane::{ControlPlane, Etcd, READY_LIMIT, wait_answers_ok};
use super::pki::{KeyPairFiles, users};
use crate::util::daemons::{Daemon, free_ports};

/// The aggregated group/version the sample-apiserver serves.
pub const GROUP_VERSION: &str = "wardle.example.com/v1alpha1";
/// Its APIService's name.
pub const APISERVICE: &str = "v1alpha1.wardle.example.com";

/// Where the extension's Service lives (tests vary them: no verdict may depend on a name).
#[derive(Debug, Clone)]
pub struct Placement {
    pub namespace: String,
    pub service: String,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            namespace: "wardle-system".into(),
            service: "api".into(),
        }
    }
}

/// A running sample-apiserver registered with the control plane.
pub struct Extension {
    pub placement: Placement,
    pub port: u16,
    pub etcd: Etcd,
    pub daemon: Daemon,
    pub serving: KeyPairFiles,
    flags: Vec<String>,
    program: PathBuf,
    dir: PathBuf,
}

impl Extension {
    /// Start it with its own etcd, apply its Service, RBAC and APIService, and wait (bounded)
    /// until a discovery request through the aggregator answers 200.
    pub fn start(cp: &ControlPlane, placement: Placement) -> Self {
        let dir = cp.dir().to_path_buf();
        let etcd = Etcd::start(&cp.assets.etcd, &dir, "extension-etcd", &[]);
        let [port] = free_ports();
        let serving = cp
            .pki
            .backends_ca
            .serving("extension", &serving_names(&placement));
        let kubeconfig = dir.join("extension.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: ext\n  user:\n    token: {}\ncontexts:\n- name: ext\n  context: {{cluster: real, user: ext}}\ncurrent-context: ext\n",
                cp.url(),
                cp.pki.cluster_ca.cert.display(),
                users::EXTENSION.1
            ),
        )
        .unwrap();
        cp.apply(&manifests(&placement, port, cp.pki.backends_ca.pem()));
        let k = kubeconfig.display().to_string();
        let flags: Vec<String> = vec![
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", serving.cert.display()),
            format!("--tls-private-key-file={}", serving.key.display()),
            format!("--etcd-servers={}", etcd.url()),
            format!("--kubeconfig={k}"),
            format!("--authentication-kubeconfig={k}"),
            format!("--authorization-kubeconfig={k}"),
            "--v=2".into(),
        ];
        let program = cp.assets.sample_apiserver.clone();
        let daemon = Daemon::start_in("sample-apiserver", &program, &flags, &dir);
        let mut ext = Extension {
            placement,
            port,
            etcd,
            daemon,
            serving,
            flags,
            program,
            dir,
        };
        ext.wait_served(cp);
        ext
    }

    /// Wait until discovery of the group/version through the aggregator answers 200 and the
    /// APIService says Available=True.
    pub fn wait_served(&mut self, cp: &ControlPlane) {
        let url = format!("{}/apis/{GROUP_VERSION}", cp.url());
        wait_answers_ok(&mut self.daemon, &cp.admin, url);
        cp.poll("the APIService turns Available", READY_LIMIT, || {
            (apiservice_available(cp) == Some(true)).then_some(())
        });
    }

    /// Start it again (after a stop or a kill) with `edit` applied to its flags.
    pub fn restart(&mut self, cp: &ControlPlane, edit: impl FnOnce(&mut Vec<String>)) {
        if self.daemon.exited().is_none() {
            self.daemon.signal("KILL");
            let _ = self.daemon.wait_exit();
        }
        edit(&mut self.flags);
        self.daemon = Daemon::start_in("sample-apiserver", &self.program, &self.flags, &self.dir);
        let _ = cp;
    }

    /// Serve `pair` from now on: restart with it (the sample-apiserver reads its certificate at
    /// start).
    pub fn restart_with_certificate(&mut self, cp: &ControlPlane, pair: &KeyPairFiles) {
        let cert = format!("--tls-cert-file={}", pair.cert.display());
        let key = format!("--tls-private-key-file={}", pair.key.display());
        self.restart(cp, |flags| {
            flags.retain(|f| {
                !f.starts_with("--tls-cert-file=") && !f.starts_with("--tls-private-key-file=")
            });
            flags.push(cert);
            flags.push(key);
        });
    }

    /// Wait until the extension answers its own `/readyz` (directly, as a kubelet would probe).
    pub fn wait_ready_direct(&mut self) {
        let url = format!("https://127.0.0.1:{}/readyz", self.port);
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .no_proxy()
            .tls_danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        RUNTIME.block_on(self.daemon.wait_until(READY_LIMIT, || {
            let http = http.clone();
            let url = url.clone();
            // Anonymous: 200, or 401/403 — any HTTP answer means it is up.
            async move { http.get(&url).send().await.is_ok() }
        }));
    }
}

/// The names the extension's serving certificate must carry: the Service's DNS names, which the
/// aggregator verifies (`<svc>.<ns>.svc`), and loopback.
pub fn serving_names(p: &Placement) -> Vec<&str> {
    // Leaked once per extension: the names live as long as the test.
    let svc: &'static str =
        Box::leak(format!("{}.{}.svc", p.service, p.namespace).into_boxed_str());
    let ns: &'static str = Box::leak(format!("{}.{}", p.service, p.namespace).into_boxed_str());
    vec![svc, ns, "localhost", "127.0.0.1"]
}

/// The APIService's `Available` condition status, when it has one.
pub fn apiservice_available(cp: &ControlPlane) -> Option<bool> {
    let out = cp.kubectl_output(&["get", "apiservice", APISERVICE, "-o", "json"], None);
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")
        .map(|c| c["status"] == "True")
}

/// The objects that register the extension.
pub fn manifests(p: &Placement, port: u16, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let (ns, svc) = (&p.namespace, &p.service);
    let user = users::EXTENSION.0;
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {svc}, namespace: {ns}}}
spec: {{type: ExternalName, externalName: localhost, ports: [{{name: https, port: {port}}}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "{ns}:{svc}:auth-delegator"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}}
subjects: [{{kind: User, name: {user}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: "{ns}-{svc}-auth-reader", namespace: kube-system}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}}
subjects: [{{kind: User, name: {user}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: "{ns}:{svc}:misc"}}
rules:
- {{apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}}
- {{apiGroups: [admissionregistration.k8s.io], resources: ["*"], verbs: [get, list, watch]}}
- {{apiGroups: [flowcontrol.apiserver.k8s.io], resources: ["*"], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "{ns}:{svc}:misc"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "{ns}:{svc}:misc"}}
subjects: [{{kind: User, name: {user}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: "{ns}:{svc}:users"}}
rules:
- {{apiGroups: [wardle.example.com], resources: ["*"], verbs: ["*"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "{ns}:{svc}:users"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "{ns}:{svc}:users"}}
subjects:
- {{kind: Group, name: wardle-users, apiGroup: rbac.authorization.k8s.io}}
- {{kind: Group, name: flooders, apiGroup: rbac.authorization.k8s.io}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: wardle.example.com
  version: v1alpha1
  service: {{namespace: {ns}, name: {svc}, port: {port}}}
  caBundle: {ca}
  groupPriorityMinimum: 1000
  versionPriority: 15
"#
    )
}
