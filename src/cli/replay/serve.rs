//! `replay serve SCENARIO`: run the reference server for one scenario until interrupted.
//! `replay serve --bundle FILE` / `--raw PATH…`: serve a recorded incident back the same way.
//!
//! It prints where the server listens and the `export KUBECONFIG=…` line, writes the kubeconfig
//! (to `--kubeconfig-out`, or into a new private temporary directory), and stops on SIGINT, SIGTERM
//! or SIGHUP. The kubeconfig holds the server's admin token, so the temporary directory — the
//! kubeconfig and the carried evidence beside it — is removed when the command ends, whether it
//! was interrupted or failed; a `--kubeconfig-out` file is the caller's and is left alone.
//! A recording also gets the evidence its replay cannot serve written next to the kubeconfig
//! (`carried-evidence.yaml`, see `bundle::carried`), with the `--merge` flag that adds it to a
//! `scan`/`collect`, and the `--etcd-metrics-url` of its etcd port when it has etcd evidence.
//! A bad scenario, bundle or raw file is one line naming the file and place, exit 2.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::bundle::EvidenceBundle;
use crate::cli::{EXIT_OK, input_error};
use crate::refserver::{ClientAuth, RefServer, RunningServer, StartOptions, scenario};

/// Arguments of `replay serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A scenario file (fixtures/scenarios/*.yaml).
    #[arg(
        value_name = "SCENARIO",
        required_unless_present_any = ["bundle", "raw"],
        conflicts_with_all = ["bundle", "raw"]
    )]
    scenario: Option<PathBuf>,
    /// Serve a recorded evidence bundle (YAML or JSON) instead: its objects, metrics, health
    /// checks, and the recorded outcomes of its probed aggregated paths. What cannot be served
    /// (client output, logs, served certificates, …) is written beside the kubeconfig for --merge.
    #[arg(long, value_name = "FILE", conflicts_with = "raw")]
    bundle: Option<PathBuf>,
    /// Serve raw incident files instead (kubectl output, /metrics dumps, logs, …), imported first
    /// as `import --raw` does.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    raw: Vec<PathBuf>,
    /// Port on 127.0.0.1 (default: an ephemeral port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the kubeconfig (default: a file in a new temporary directory).
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
    /// Authenticate with the admin's client certificate instead of a bearer token.
    #[arg(long)]
    client_cert: bool,
    /// Do not run the scenario's `traffic:` (its own clients): only your clients reach it.
    #[arg(long)]
    idle: bool,
}

/// What to serve, loaded and checked before anything starts.
enum Source {
    Scenario(Box<scenario::Scenario>),
    Recording(Box<EvidenceBundle>),
}

fn load(args: &ServeArgs) -> anyhow::Result<Source> {
    if let Some(file) = &args.bundle {
        let b = crate::cli::import::load_bundle_arg(file)?;
        return Ok(Source::Recording(Box::new(b)));
    }
    if !args.raw.is_empty() {
        for p in &args.raw {
            crate::cli::input::check_raw_path(p).map_err(input_error)?;
        }
        let b = crate::bundle::raw::import_paths(&args.raw).map_err(input_error)?;
        return Ok(Source::Recording(Box::new(b)));
    }
    let path = args.scenario.as_deref().unwrap_or(Path::new(""));
    let s = scenario::load(path).map_err(input_error)?;
    Ok(Source::Scenario(Box::new(s)))
}

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    let source = load(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut signals = Signals::install()?;
        let started = std::time::Instant::now();
        let options = StartOptions {
            port: args.port,
            idle: args.idle,
        };
        let (server, carried) = match source {
            Source::Scenario(s) => (RefServer::start(*s, options).await?, None),
            Source::Recording(b) => {
                let carried = crate::bundle::carried::carried(&b);
                (RefServer::replay(*b, options).await?, Some(carried))
            }
        };
        let auth = if args.client_cert {
            ClientAuth::Cert
        } else {
            ClientAuth::Token
        };
        // Dropped (and so removed) however this block ends: after a signal, or on an error.
        let mut temporary = None;
        let path = match args.kubeconfig_out {
            Some(p) => p,
            None => {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("extpath-replay-{}-", server.addr().port()))
                    .tempdir()?;
                let path = dir.path().join("kubeconfig");
                temporary = Some(dir);
                path
            }
        };
        write_private(&path, &server.kubeconfig(auth))?;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{} serving on {} (started in {} ms)",
            match &carried {
                None => format!("scenario {:?}", server.scenario().name),
                Some(_) => server.scenario().name.clone(),
            },
            server.url(),
            started.elapsed().as_millis()
        )?;
        if let Some(etcd) = server.etcd_url() {
            writeln!(out, "etcd metrics on {etcd}/metrics")?;
        }
        writeln!(out, "export KUBECONFIG={}", path.display())?;
        let mut flags = backend_flags(&server);
        if let Some(carried) = &carried {
            flags.extend(recording_flags(&server, carried, &path, &mut out)?);
        }
        if !flags.is_empty() {
            writeln!(out, "flags for scan/collect: {}", flags.join(" "))?;
        }
        writeln!(out, "press Ctrl-C to stop")?;
        out.flush()?;
        drop(out);
        signals.wait().await;
        server.shutdown().await;
        if let Some(dir) = temporary {
            let shown = dir.path().display().to_string();
            dir.close()
                .map_err(|e| anyhow::anyhow!("{shown}: cannot remove: {e}"))?;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(EXIT_OK)
}

/// A client beside the server reaches the backends on loopback, not at their cluster addresses;
/// these flags let `scan`/`collect` shake hands with them.
fn backend_flags(server: &RunningServer) -> Vec<String> {
    server
        .backend_addresses()
        .iter()
        .map(|(svc, addr)| format!("--backend-address {svc}={addr}"))
        .collect()
}

/// Write the carried evidence next to the kubeconfig, say what the recording's metrics are, and
/// return the flags a collection of the replay needs.
fn recording_flags(
    server: &RunningServer,
    carried: &EvidenceBundle,
    kubeconfig: &Path,
    out: &mut impl Write,
) -> anyhow::Result<Vec<String>> {
    let mut flags = Vec::new();
    if let Some(etcd) = server.etcd_url() {
        flags.push(format!("--etcd-metrics-url {etcd}/metrics"));
    }
    let windowed = server
        .recording()
        .and_then(|b| b.metrics_for(crate::bundle::MetricTarget::Apiserver))
        .map(|m| m.window.is_some());
    match windowed {
        Some(true) => writeln!(
            out,
            "metrics: windowed; a collection with any --window reads the recorded deltas over it"
        )?,
        Some(false) => {
            writeln!(out, "metrics: a single dump; --window 0 keeps it one")?;
            flags.push("--window 0".into());
        }
        None => {}
    }
    let file = kubeconfig.with_file_name("carried-evidence.yaml");
    std::fs::write(&file, carried.to_yaml()?)
        .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", file.display()))?;
    writeln!(
        out,
        "evidence the replay cannot serve (client output, logs, served certificates, …): {}",
        file.display()
    )?;
    flags.push(format!("--merge {}", file.display()));
    Ok(flags)
}

fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// Ctrl-C (SIGINT), SIGTERM (kill, systemd, a CI runner's timeout) and SIGHUP (the terminal
/// closed), handled from before anything is written: handling them, rather than dying of them, is
/// what lets the temporary kubeconfig be removed.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    async fn wait(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }
}
