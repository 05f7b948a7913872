//! Real Kubernetes control planes for tests, in the spirit of controller-runtime's envtest: the
//! real kube-apiserver (with its aggregator) of a generation, a real etcd, the upstream
//! sample-apiserver registered through an APIService, and webhook and conversion backends served
//! by the test itself — all on 127.0.0.1 with ephemeral ports and certificates from the project's
//! own `pki`, polled until ready within a bound, and killed when the guard drops (also on panic).
//!
//! **Where the binaries come from: `EXTPATH_K8S_ASSETS`.** envtest reads one directory,
//! `KUBEBUILDER_ASSETS`, holding `kube-apiserver`, `etcd` and `kubectl`. We test two generations
//! at once, so the variable names a directory holding one such directory per generation —
//! exactly what `../shared/k8s/unpack DIR` writes:
//!
//! ```text
//! $EXTPATH_K8S_ASSETS/v1.24/{kube-apiserver, sample-apiserver[, etcd]}
//! $EXTPATH_K8S_ASSETS/v1.36/{kube-apiserver, sample-apiserver, etcd}
//! ```
//!
//! A generation directory without `etcd` uses the `etcd` on PATH (Debian's `etcd-server` 3.4,
//! which the 1.24 captures came from; 1.36 needs etcd ≥ 3.5, see `../shared/k8s/README.md`).
//! `kubectl` is the one on PATH, as in every other test. Without the variable the real tests say in
//! one line what to set and pass — except under CI (`CI` set), where a missing binary fails them.
//!
//! What is here, one file per part: [`pki`] (the cluster's certificates), [`control_plane`] (etcd,
//! the etcd delay proxy, kube-apiserver; restart with other flags; signals), [`extension`] (the
//! sample-apiserver and its registration), [`backend`] (the test's own HTTPS webhook/conversion
//! server, whose behaviour a test switches), [`delay_proxy`] (a TCP proxy that can add latency),
//! [`traffic`] (clients that keep using the cluster while a scan watches, and watchers that stop
//! reading), [`incident`] (the folder of files an on-call engineer saves, for `analyze --raw`).

pub(crate) mod backend;
pub(crate) mod control_plane;
pub(crate) mod delay_proxy;
pub(crate) mod extension;
pub(crate) mod incident;
pub(crate) mod pki;
pub(crate) mod traffic;

use std::path::PathBuf;
use std::sync::LazyLock;

pub(crate) use control_plane::ControlPlane;

/// The environment variable naming the assets directory.
pub const ASSETS_VAR: &str = "EXTPATH_K8S_ASSETS";

/// A generation of kube-apiserver under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// v1.24.0-alpha.1 (2021-12-23): flowcontrol v1beta2, core/v1 Endpoints in the aggregator, the
    /// release the real captures came from.
    V1_24,
    /// v1.36.2: flowcontrol v1, EndpointSlices, borrowing APF levels.
    V1_36,
}

impl Generation {
    /// The directory name under the assets directory.
    pub fn dir(self) -> &'static str {
        match self {
            Generation::V1_24 => "v1.24",
            Generation::V1_36 => "v1.36",
        }
    }
    /// The flowcontrol API version this generation serves.
    pub fn flowcontrol(self) -> &'static str {
        match self {
            Generation::V1_24 => "flowcontrol.apiserver.k8s.io/v1beta2",
            Generation::V1_36 => "flowcontrol.apiserver.k8s.io/v1",
        }
    }
}

/// The binaries of one generation.
#[derive(Debug, Clone)]
pub struct Assets {
    pub generation: Generation,
    pub kube_apiserver: PathBuf,
    pub sample_apiserver: PathBuf,
    /// `etcd` of the generation directory, else the one on PATH.
    pub etcd: PathBuf,
}

/// The binaries of `generation`, or `None` (after one line saying what to set) when the assets
/// are not configured on a developer's machine. Under CI a missing binary is a failure.
pub fn assets(generation: Generation) -> Option<Assets> {
    match locate(generation) {
        Ok(a) => Some(a),
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("real-Kubernetes tests need their binaries under CI: {why}");
            }
            eprintln!(
                "real-Kubernetes test skipped: {why} (set {ASSETS_VAR}=$(../shared/k8s/unpack target/k8s))"
            );
            None
        }
    }
}

fn locate(generation: Generation) -> Result<Assets, String> {
    let root = std::env::var_os(ASSETS_VAR).ok_or_else(|| format!("{ASSETS_VAR} is not set"))?;
    let dir = PathBuf::from(root).join(generation.dir());
    let need = |name: &str| {
        let p = dir.join(name);
        if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{} is missing", p.display()))
        }
    };
    let etcd = match need("etcd") {
        Ok(p) => p,
        Err(_) => on_path("etcd").ok_or_else(|| {
            format!(
                "no etcd in {} and none on PATH (Debian: etcd-server)",
                dir.display()
            )
        })?,
    };
    Ok(Assets {
        generation,
        kube_apiserver: need("kube-apiserver")?,
        sample_apiserver: need("sample-apiserver")?,
        etcd,
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The runtime the test's own servers (backends, the etcd proxy, traffic) run on: its own
/// threads, so they keep answering whatever the test thread is doing (waiting for a `kubectl`,
/// or for a scan to finish).
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("real-k8s-backends")
        .enable_all()
        .build()
        .unwrap()
});

/// At most this many control planes run at once on one machine — across test processes too
/// (several checkouts' suites, or `cargo test` beside `cargo nextest`): each kube-apiserver takes
/// about a core while it starts, and a scan's deadlines must not measure the machine's overload.
const MAX_CONCURRENT: usize = 2;

/// A slot among [`MAX_CONCURRENT`], held as an exclusive `flock` on one of the files
/// `$TMPDIR/extpath-real-k8s-slot-N.lock`; released when dropped (or when the process dies, which
/// a lock held in a process-local counter would not survive).
pub(crate) struct Slot {
    _file: std::fs::File,
}

impl Slot {
    pub(crate) fn take() -> Slot {
        use std::os::fd::AsRawFd;
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            for n in 0..MAX_CONCURRENT {
                let path = std::env::temp_dir().join(format!("extpath-real-k8s-slot-{n}.lock"));
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                // SAFETY: flock on a descriptor this function owns; no memory is passed.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                    return Slot { _file: file };
                }
            }
            // Every slot is taken: wait for one to be released (polled, backing off).
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(500));
        }
    }
}
