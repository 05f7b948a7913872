//! `replay serve SCENARIO`: run the reference server for one scenario until interrupted.
//!
//! It prints where the server listens and the `export KUBECONFIG=…` line, writes the kubeconfig
//! (to `--kubeconfig-out`, or next to a temporary directory it names), and stops on SIGINT/SIGTERM.
//! A bad scenario file is one line naming the file and line, exit 2.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::{CliError, EXIT_INPUT, EXIT_OK};
use crate::refserver::{ClientAuth, RefServer, StartOptions, scenario};

/// Arguments of `replay serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A scenario file (fixtures/scenarios/*.yaml).
    #[arg(value_name = "SCENARIO")]
    scenario: PathBuf,
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

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    let scenario = scenario::load(&args.scenario).map_err(|e| CliError {
        code: EXIT_INPUT,
        message: e.to_string(),
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let started = std::time::Instant::now();
        let server = RefServer::start(
            scenario,
            StartOptions {
                port: args.port,
                idle: args.idle,
            },
        )
        .await?;
        let auth = if args.client_cert {
            ClientAuth::Cert
        } else {
            ClientAuth::Token
        };
        let path = match args.kubeconfig_out {
            Some(p) => p,
            None => {
                let dir =
                    std::env::temp_dir().join(format!("extpath-replay-{}", server.addr().port()));
                std::fs::create_dir_all(&dir)?;
                dir.join("kubeconfig")
            }
        };
        write_private(&path, &server.kubeconfig(auth))?;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "scenario {:?} serving on {} (started in {} ms)",
            server.scenario().name,
            server.url(),
            started.elapsed().as_millis()
        )?;
        if let Some(etcd) = server.etcd_url() {
            writeln!(out, "etcd metrics on {etcd}/metrics")?;
        }
        writeln!(out, "export KUBECONFIG={}", path.display())?;
        let backends = server.backend_addresses();
        if !backends.is_empty() {
            // A client beside the server reaches the backends on loopback, not at their cluster
            // addresses; these flags let `scan`/`collect` shake hands with them.
            let flags: Vec<String> = backends
                .iter()
                .map(|(svc, addr)| format!("--backend-address {svc}={addr}"))
                .collect();
            writeln!(out, "backends for scan/collect: {}", flags.join(" "))?;
        }
        writeln!(out, "press Ctrl-C to stop")?;
        out.flush()?;
        drop(out);
        wait_for_signal().await?;
        server.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(EXIT_OK)
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

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
