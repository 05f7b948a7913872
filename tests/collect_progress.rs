//! What `collect` writes on stderr: a progress bar only when stderr is a terminal (run under
//! `script`, which gives the command a pseudo-terminal), nothing when it is not, and with `-v 1` a
//! timed line per finished step instead of the bar.

use std::process::Command;

use extpath::refserver::ClientAuth;

use crate::util::{Files, start};

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
    for step in ["APIServices", "/metrics", "TLS handshakes"] {
        assert!(
            steps.lines().any(|l| l.ends_with(&format!(": {step}"))),
            "no {step:?} in {steps}"
        );
    }
    assert!(
        steps
            .lines()
            .all(|l| l.starts_with('[') && l.contains("s] done ")),
        "{steps}"
    );
    assert_steps_match_total(&steps);
    server.shutdown().await;
}

/// `done N/TOTAL` lines count up to their total, never past it.
fn assert_steps_match_total(lines: &str) {
    let done: Vec<(u64, u64)> = lines
        .lines()
        .filter_map(|l| {
            let rest = l.split("s] done ").nth(1)?;
            let (n, t) = rest.split(':').next()?.split_once('/')?;
            Some((n.parse().ok()?, t.parse().ok()?))
        })
        .collect();
    assert!(!done.is_empty(), "{lines}");
    for (i, (n, t)) in done.iter().enumerate() {
        assert_eq!(*n, i as u64 + 1, "{lines}");
        assert!(n <= t, "step {n} of {t}: {lines}");
    }
    let (n, t) = done[done.len() - 1];
    assert_eq!(n, t, "the last step is the total: {lines}");
}

/// The README's first command on a terminal: the bar is drawn for the demo too, says what it waits
/// for during the warm-up and the metrics window with a countdown, and its line fits 80 columns;
/// with `-v 1` the numbered steps end at their total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_demo_shows_progress_with_a_countdown_on_a_terminal() {
    let f = Files::new();
    let bin = env!("CARGO_BIN_EXE_kubectl-extpath");
    let typescript = f.path().join("typescript");
    let home = f.path().to_path_buf();
    let (drawn, timed) = tokio::task::spawn_blocking(move || {
        let line = format!("{bin} scan --demo --window 2s -o json > /dev/null");
        let tty = Command::new("script")
            .arg("-qec")
            .arg(&line)
            .arg(&typescript)
            .env("HOME", &home)
            .env("COLUMNS", "80")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        assert!(tty.status.code().is_some(), "{tty:?}");
        let drawn = std::fs::read_to_string(&typescript).unwrap();
        let timed = Command::new(bin)
            .args(["scan", "--demo", "--window", "1s", "-v", "1", "-o", "json"])
            .env("HOME", &home)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        (drawn, String::from_utf8_lossy(&timed.stderr).into_owned())
    })
    .await
    .unwrap();
    assert!(drawn.contains("collecting ["), "no bar: {drawn:?}");
    assert!(
        drawn.contains("second /metrics scrape in 2 s (--window)"),
        "no countdown during the window: {drawn:?}"
    );
    assert!(
        drawn.contains("scan starts in 1 s (demo warm-up)"),
        "no word during the warm-up: {drawn:?}"
    );
    // Every frame of the bar: position never past the total, and no line wider than 80.
    for frame in drawn
        .split(['\r', '\n'])
        .filter(|f| f.contains("collecting ["))
    {
        let visible: String = strip_ansi(frame);
        assert!(visible.chars().count() <= 80, "{visible:?}");
        if let Some(rest) = visible.split("] ").nth(1)
            && let Some((pos, len)) = rest.split(' ').next().and_then(|t| t.split_once('/'))
            && let (Ok(pos), Ok(len)) = (pos.parse::<u64>(), len.parse::<u64>())
        {
            assert!(pos <= len, "{visible:?}");
        }
    }
    assert!(
        timed.contains("waiting 1 s: second /metrics scrape (--window)"),
        "{timed}"
    );
    let done: String = timed
        .lines()
        .filter(|l| l.contains("s] done "))
        .collect::<Vec<_>>()
        .join("\n");
    assert_steps_match_total(&done);
}

/// The text of a terminal frame without its escape sequences.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
