//! Running the real `kubectl-extpath` binary: in a temporary HOME ([`Files`]) with the proxy,
//! kubeconfig and in-cluster variables of the developer's shell removed, so a test sees only the
//! configuration it wrote.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::extpath;

/// A temporary directory that is the HOME of a run and holds the files a test writes
/// (kubeconfigs, rules, scenarios); removed on drop.
pub(crate) struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    pub(crate) fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// What one run of the binary left: exit code and both streams.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn bundle(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not a JSON bundle ({e}); stderr: {}", self.stderr))
    }
}

/// Run the binary in an empty HOME with no KUBECONFIG unless given.
pub(crate) fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    // A developer's shell leaks into a run in exactly these ways: a kubeconfig that points at a
    // real cluster, a proxy that would carry 127.0.0.1 traffic away (kube-rs honours HTTPS_PROXY),
    // and the in-cluster variables that make the client prefer the service-account config when
    // tests run inside a pod (CI runners on Kubernetes set them).
    let mut cmd = extpath();
    cmd.env_remove("KUBECONFIG")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", home)
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `kubectl-extpath SUBCOMMAND ARGS…` off the async runtime (the reference server and the
/// test's writers keep running meanwhile); the run and its wall time.
pub(crate) async fn extpath_run(
    f: &Files,
    subcommand: &str,
    args: Vec<String>,
) -> (Run, std::time::Duration) {
    let home = f.path().to_path_buf();
    let subcommand = subcommand.to_string();
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let mut all = vec![subcommand.as_str()];
        all.extend(args.iter().map(String::as_str));
        let r = run(&home, &all, &[]);
        (r, started.elapsed())
    })
    .await
    .unwrap()
}
