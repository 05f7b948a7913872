//! An incident folder as an on-call engineer saves one from a real control plane: `kubectl get
//! -o json` of the objects on the path, the failing client's output (`kubectl -v=6` traces and its
//! error), `curl -v` of the request with the `-w` trailer people paste, `/metrics` and
//! `/readyz?verbose`, etcd's health and metrics, and log excerpts. `analyze --raw` reads it by
//! content (the file names here are deliberately plain: the importer must not need them).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::control_plane::ControlPlane;
use crate::util::daemons::Daemon;

/// A folder being filled; removed on drop, unless `EXTPATH_KEEP_INCIDENTS` is set (then its path
/// is printed, to look at what a failing `analyze --raw` read).
pub struct Incident {
    dir: tempfile::TempDir,
    n: usize,
}

impl Drop for Incident {
    fn drop(&mut self) {
        if std::env::var_os("EXTPATH_KEEP_INCIDENTS").is_some() {
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap()).keep();
            eprintln!("incident folder kept: {}", kept.display());
        }
    }
}

impl Default for Incident {
    fn default() -> Self {
        Self::new()
    }
}

impl Incident {
    pub fn new() -> Self {
        Incident {
            dir: tempfile::Builder::new()
                .prefix("extpath-incident-")
                .tempdir()
                .unwrap(),
            n: 0,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&mut self, stem: &str) -> PathBuf {
        self.n += 1;
        self.dir.path().join(format!("{:02}-{stem}.txt", self.n))
    }

    /// Write `text` as a file of its own.
    pub fn write(&mut self, stem: &str, text: &str) -> PathBuf {
        let p = self.file(stem);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `kubectl ARGS` (with the admin kubeconfig unless `args` names another context): stdout,
    /// then stderr, then `exit=N` — what `kubectl … 2>&1; echo exit=$?` leaves.
    pub fn kubectl(&mut self, cp: &ControlPlane, stem: &str, args: &[&str]) -> PathBuf {
        let out = cp.kubectl_output(args, None);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        if !text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("exit={}\n", out.status.code().unwrap_or(-1)));
        self.write(stem, &text)
    }

    /// `kubectl get KINDS -A -o json` (only stdout: the objects), skipped when kubectl fails.
    pub fn objects(&mut self, cp: &ControlPlane, kinds: &str) {
        if let Some(json) = objects_json(cp, kinds) {
            self.write(&kinds.replace(',', "-"), &json);
        }
    }

    /// `curl -sS -v` of `path` on kube-apiserver as the admin, with the `-w` trailer
    /// `HTTP <code> time_total=<s>` and `curl exit=N`.
    pub fn curl_apiserver(&mut self, cp: &ControlPlane, stem: &str, path: &str, extra: &[&str]) {
        let url = format!("{}{path}", cp.url());
        let mut args: Vec<String> = vec![
            "--cacert".into(),
            cp.pki.cluster_ca.cert.display().to_string(),
            "--cert".into(),
            cp.pki.admin.cert.display().to_string(),
            "--key".into(),
            cp.pki.admin.key.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(url);
        self.curl(stem, &args);
    }

    /// `curl -sS -v ARGS -w …` as run from a shell; stdout and stderr in one file, as `2>&1`
    /// leaves them.
    pub fn curl(&mut self, stem: &str, args: &[String]) -> PathBuf {
        let out = Command::new("curl")
            .args(["-sS", "-v", "--max-time", "10"])
            .args(args)
            .args(["-w", "\nHTTP %{http_code} time_total=%{time_total}\n"])
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .output()
            .expect("curl is on PATH (.ci/run installs it)");
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("curl exit={}\n", out.status.code().unwrap_or(-1)));
        self.write(stem, &text)
    }

    /// What every folder holds: the path's objects, kube-apiserver's `/metrics` and
    /// `/readyz?verbose`, etcd's `/health` (`curl -v`, as people check it) and `/metrics`. Each is
    /// fetched at once beside the others (a frozen etcd holds every LIST until its timeout), and a
    /// fetch that gets no answer leaves no dump — except etcd's `/health`, whose `curl -v` says
    /// whom it dialled and that nothing answered.
    pub fn usual(&mut self, cp: &ControlPlane) {
        const KINDS: [&str; 5] = [
            "apiservices",
            "validatingwebhookconfigurations,mutatingwebhookconfigurations",
            "customresourcedefinitions",
            "services,endpoints",
            "flowschemas,prioritylevelconfigurations",
        ];
        // etcd where kube-apiserver dials it (its `--etcd-servers`), as an on-call reads it from the
        // manifest: here the proxy in front of etcd, so a dead etcd is a connection closed on
        // the request, not a refused dial of an address no other evidence names.
        let etcd = format!("http://127.0.0.1:{}", cp.etcd_proxy.port);
        let (objects, metrics, readyz, etcd_metrics) = std::thread::scope(|s| {
            let objects: Vec<_> = KINDS
                .iter()
                .map(|k| s.spawn(move || objects_json(cp, k)))
                .collect();
            let metrics = s.spawn(|| cp.raw_get("/metrics"));
            let readyz = s.spawn(|| cp.raw_get("/readyz?verbose"));
            let etcd_metrics = s.spawn(|| {
                let out = Command::new("curl")
                    .args(["-sS", "--max-time", "5", &format!("{etcd}/metrics")])
                    .env_remove("HTTP_PROXY")
                    .env_remove("http_proxy")
                    .output()
                    .expect("curl is on PATH (.ci/run installs it)");
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            });
            (
                objects
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>(),
                metrics.join().unwrap(),
                readyz.join().unwrap(),
                etcd_metrics.join().unwrap(),
            )
        });
        for (kinds, json) in KINDS.iter().zip(objects) {
            if let Some(json) = json {
                self.write(&kinds.replace(',', "-"), &json);
            }
        }
        // Status 0: nothing answered (the admin client's timeout).
        if metrics.0 != 0 {
            self.write("apiserver-metrics", &metrics.1);
        }
        if readyz.0 != 0 {
            self.write("readyz", &readyz.1);
        }
        self.curl(
            "etcd-health",
            &["--max-time".into(), "3".into(), format!("{etcd}/health")],
        );
        if let Some(m) = etcd_metrics {
            self.write("etcd-metrics", &m);
        }
    }

    /// The last `lines` lines of a process's log.
    pub fn log(&mut self, stem: &str, daemon: &Daemon, lines: usize) {
        self.write(stem, &daemon.log_tail(lines));
    }
}

/// `kubectl get KINDS -A -o json`'s objects, `None` when kubectl fails — also when it gets no
/// answer within 5 s (a LIST waits on etcd: a frozen one would hold it until kube-apiserver's
/// own 60 s timeout).
fn objects_json(cp: &ControlPlane, kinds: &str) -> Option<String> {
    let out = cp.kubectl_output(
        &["get", kinds, "-A", "-o", "json", "--request-timeout=5s"],
        None,
    );
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
