//! Real etcd and Prometheus processes for the source tests: started on 127.0.0.1 with ephemeral
//! ports and a temporary data directory, polled until ready (never slept on), and killed when the
//! guard drops — also when a test panics, and also when the test left the process stopped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `n` distinct free ports on 127.0.0.1: all bound at once (so they differ), then released for the
/// daemon to take. Another process could take one in between; on a test machine that does not
/// happen in practice, and a daemon that fails to bind says so in its log.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// A running daemon; killed on drop.
pub struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// Its data and configuration directory when it owns one, removed on drop (after the process
    /// is gone).
    _dir: Option<tempfile::TempDir>,
}

impl Daemon {
    /// Start `program` with `args`, output to a log file in `dir`.
    pub fn start(
        name: &'static str,
        program: &str,
        args: &[String],
        dir: tempfile::TempDir,
    ) -> Self {
        let mut d = Self::start_in(name, program.as_ref(), args, dir.path());
        d._dir = Some(dir);
        d
    }

    /// Start `program` with `args` in a directory someone else owns (a control plane's, shared
    /// by its processes), appending to `NAME.log` there so a restarted daemon's log continues.
    pub fn start_in(name: &'static str, program: &Path, args: &[String], dir: &Path) -> Self {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(program)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} cannot be started ({e}); .ci/run installs it",
                    program.display()
                )
            });
        Daemon {
            name,
            child,
            log,
            _dir: None,
        }
    }

    /// Whether the process has exited (and its status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Wait for the process to exit (after a signal that ends it).
    pub fn wait_exit(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }

    /// Wait up to `limit` for the process to exit; `None` when it is still running.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if started.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// The log file's path.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the log (a kube-apiserver's whole log is too long for a message).
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Send a signal (`STOP`, `CONT`) with the shell's `kill` (present wherever `sh` is, unlike
    /// procps' kill(1) on a minimal image).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("sh")
            .args(["-c", &format!("kill -{sig} {}", self.pid())])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} {}", self.pid());
    }

    /// Poll `ready` until it says yes, failing with the log when the process exits or `limit`
    /// passes.
    pub async fn wait_until<F, Fut>(&mut self, limit: Duration, mut ready: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            if ready().await {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited ({status}) before it was ready:\n{}",
                    self.name,
                    self.log_tail(80)
                );
            }
            assert!(
                started.elapsed() < limit,
                "{} not ready within {limit:?}:\n{}",
                self.name,
                self.log_tail(80)
            );
            // Back off between polls, not a wait for a guessed start-up time.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // `kill` is SIGKILL, which also ends a process a test froze with SIGSTOP (the etcd-stall
        // tests do); a SIGTERM would wait, queued, until someone sent CONT. `wait` reaps it so no
        // zombie outlives the test binary.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory for a daemon.
pub fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Write a file in `dir`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
