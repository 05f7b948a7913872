//! What `collect` writes on stderr: a progress bar only when stderr is a terminal (run under
//! `script`, which gives the command a pseudo-terminal), nothing when it is not, and with `-v 1` a
//! timed line per finished step instead of the bar.

use std::process::Command;

use extpath::refserver::ClientAuth;

use crate::collect::{Files, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bar_is_drawn_on_a_terminal_only_and_v1_times_the_steps() {
    let server = start("healthy").await;
    let f = Files::new();
    let kubeconfig = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let bin = env!("CARGO_BIN_EXE_kubectl-extpath");
    let home = f.path().to_path_buf();
    let out = f.path().join("bundle.json");
    let typescript = f.path().join("typescript");
    let (tty, plain, timed) = tokio::task::spawn_blocking(move || {
        let run = |cmd: &mut Command| {
            cmd.env("KUBECONFIG", &kubeconfig)
                .env("HOME", &home)
                .env_remove("NO_COLOR")
                .output()
                .unwrap()
        };
        // On a terminal: `script` runs the command on a pseudo-terminal and records what it drew.
        let line = format!("{bin} collect --window 0 -o json > {}", out.display());
        let tty = run(Command::new("script")
            .arg("-qec")
            .arg(&line)
            .arg(&typescript));
        assert!(
            tty.status.success(),
            "{}",
            String::from_utf8_lossy(&tty.stderr)
        );
        let drawn = std::fs::read_to_string(&typescript).unwrap();
        let bundle: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let plain = run(Command::new(bin).args(["collect", "--window", "0", "-o", "json"]));
        let timed =
            run(Command::new(bin).args(["collect", "-v", "1", "--window", "0", "-o", "json"]));
        ((drawn, bundle), plain, timed)
    })
    .await
    .unwrap();

    let (drawn, bundle) = tty;
    assert!(
        drawn.contains("collecting ["),
        "no bar on the terminal: {drawn:?}"
    );
    assert_eq!(bundle["kind"], "EvidenceBundle", "stdout stays the bundle");

    assert!(plain.status.success());
    assert!(
        plain.stderr.is_empty(),
        "stderr is not a terminal, yet: {}",
        String::from_utf8_lossy(&plain.stderr)
    );

    let steps = String::from_utf8_lossy(&timed.stderr);
    assert!(timed.status.success());
    assert!(!steps.contains("collecting ["), "{steps}");
    for step in [
        "done: APIServices",
        "done: /metrics",
        "done: TLS handshakes",
    ] {
        assert!(steps.contains(step), "no {step:?} in {steps}");
    }
    assert!(
        steps
            .lines()
            .all(|l| l.starts_with('[') && l.contains("s] done: ")),
        "{steps}"
    );
    server.shutdown().await;
}
