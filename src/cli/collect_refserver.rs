//! Collecting from a reference server that runs in this process, as a client beside it would.
//!
//! `scan --demo` and `replay` run a scenario and then collect from it through the real TCP/TLS
//! listener with the admin's credentials — the same code path as a live cluster. The only difference
//! is where backends are dialled for the TLS handshake: the server says on which loopback port each
//! Service's backend listens (`--backend-address`), since the scenario's pod addresses are not real.

use crate::bundle::EvidenceBundle;
use crate::collect::{CollectOptions, ConnectOptions, NoProgress, Progress};
use crate::refserver::RunningServer;

/// Collect from `server` with `opts` (its `backend_addresses` are filled in from the server).
///
/// # Errors
/// When the temporary CA file cannot be written, or the client cannot be configured.
pub async fn collect_from_refserver(
    server: &RunningServer,
    opts: CollectOptions,
) -> anyhow::Result<EvidenceBundle> {
    collect_from_refserver_with(server, opts, &NoProgress).await
}

/// [`collect_from_refserver`], reporting progress (`scan --demo` on a terminal).
///
/// # Errors
/// As [`collect_from_refserver`].
pub async fn collect_from_refserver_with(
    server: &RunningServer,
    mut opts: CollectOptions,
    progress: &dyn Progress,
) -> anyhow::Result<EvidenceBundle> {
    let dir = tempfile::tempdir()?;
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, server.ca_pem())?;
    let connect = ConnectOptions {
        server: Some(server.url()),
        certificate_authority: Some(ca),
        token: Some(server.admin_token().to_string()),
        request_timeout: opts.request_timeout,
        // Nothing from the environment: not the user's kubeconfig, not their proxy.
        isolated: true,
        ..ConnectOptions::default()
    };
    let conn = crate::collect::connect(&connect).await?;
    for (svc, addr) in server.backend_addresses() {
        opts.backend_addresses.entry(svc).or_insert(addr);
    }
    let collected = crate::collect::collect(&conn, &opts, progress).await?;
    if let Some(why) = collected.unreachable {
        anyhow::bail!("the reference server could not be reached: {why}");
    }
    // A replayed recording refuses what it does not hold (403, "not in the recording"); one that
    // holds none of the sources is still a recording to replay, its evidence carried beside.
    if let Some(why) = collected.refused
        && !server.is_recording()
    {
        anyhow::bail!("the reference server refused every read: {why}");
    }
    Ok(collected.bundle)
}
