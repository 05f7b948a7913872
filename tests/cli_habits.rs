//! kubectl habits of the command line that need a real process around the binary: a terminal's
//! width, output that is piped, stdin and FIFOs as FILE, and `replay serve` cleaning up its
//! admin kubeconfig when interrupted. (What a plain transcript can show is in tests/cmd/.)

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{extpath, repo};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kubectl-extpath"))
}

/// A bundle whose table has long summaries (they wrap at 100 columns).
fn bundle() -> PathBuf {
    repo().join("fixtures/bundles/adm-webhooks.yaml")
}

/// A phrase of one summary that a 100-column table wraps.
const PHRASE: &str = "webhook noep.webhook.example.com (failurePolicy Fail) has no ready backend behind Service hooks/noep";

/// Run the binary with stdout on a pseudo-terminal of `cols` columns; what it printed.
fn on_terminal(args: &[&str], cols: u16, env: &[(&str, &str)]) -> String {
    let (mut master, slave) = {
        let mut m: libc::c_int = -1;
        let mut s: libc::c_int = -1;
        let size = libc::winsize {
            ws_row: 50,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two file descriptors into m and s, which we then own.
        let rc = unsafe {
            libc::openpty(
                &mut m,
                &mut s,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
        unsafe {
            (
                std::fs::File::from(OwnedFd::from_raw_fd(m)),
                OwnedFd::from_raw_fd(s),
            )
        }
    };
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_remove("COLUMNS")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // The parent's copy of the slave went into the Command; once the child exits, reading the
    // master ends (EIO on Linux).
    drop(cmd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    child.wait().unwrap();
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn the_table_fits_the_terminal_and_piped_output_is_not_wrapped() {
    let bundle = bundle();
    let args = ["analyze", bundle.to_str().unwrap()];
    // On a terminal: its width, or COLUMNS when set.
    let narrow = on_terminal(&args, 90, &[]);
    assert!(narrow.contains("SEVERITY"), "{narrow}");
    assert!(!narrow.contains(PHRASE), "wrapped at 90 columns");
    let table_width = |t: &str| {
        t.lines()
            .take_while(|l| !l.is_empty())
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    };
    assert!(table_width(&narrow) <= 90, "{narrow}");
    let wide = on_terminal(&args, 90, &[("COLUMNS", "200")]);
    assert!(
        table_width(&wide) > 90 && table_width(&wide) <= 200,
        "{wide}"
    );

    // Piped: nothing wrapped, so grep finds every phrase on one line.
    let out = extpath().args(args).env("COLUMNS", "80").output().unwrap();
    let piped = String::from_utf8(out.stdout).unwrap();
    assert!(
        piped.lines().any(|l| l.contains(PHRASE)),
        "a summary on one line:\n{piped}"
    );
    assert!(widest(&piped) > 100);
}

#[test]
fn wide_output_is_one_line_per_verdict() {
    let out = extpath()
        .args(["analyze", bundle().to_str().unwrap(), "-o", "wide"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    // 18 verdicts, 18 rows: nothing stacks in a cell.
    assert_eq!(rows.len(), 18, "{text}");
    let header = text.lines().next().unwrap();
    for col in [
        "SEVERITY", "CLASS", "SUBJECT", "RUNG", "CONF", "SUMMARY", "EVIDENCE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(rows.iter().any(|r| r.contains(PHRASE)));
    // The old flag says the same.
    let old = extpath()
        .args(["analyze", bundle().to_str().unwrap(), "--wide"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(old.stdout).unwrap(), text);
}

#[test]
fn a_bundle_is_read_from_stdin_and_from_a_fifo() {
    let text = std::fs::read(bundle()).unwrap();
    let from_file = extpath()
        .args(["analyze", bundle().to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    for sub in ["analyze", "import"] {
        let out = extpath()
            .args([sub, "-", "-o", "json"])
            .write_stdin(text.clone())
            .output()
            .unwrap();
        assert!(
            out.status.success() || (sub == "analyze" && out.status.code() == Some(1)),
            "{sub}: {out:?}"
        );
        if sub == "analyze" {
            assert_eq!(out.stdout, from_file.stdout, "the same diagnosis");
        } else {
            let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(b["kind"], "EvidenceBundle");
        }
    }
    // A bad bundle on stdin is named as stdin.
    let out = extpath()
        .args(["analyze", "-"])
        .write_stdin("kind: Nope\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("error: (stdin)"),
        "{out:?}"
    );

    // A FIFO with a writer: read like stdin.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("bundle.fifo");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            f.write_all(&text).unwrap();
        })
    };
    let out = extpath()
        .args(["analyze", fifo.to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    writer.join().unwrap();
    assert_eq!(out.stdout, from_file.stdout, "{out:?}");

    // As --raw PATH it is refused at once: raw import reads files and directories.
    let out = extpath()
        .args(["analyze", "--raw", fifo.to_str().unwrap()])
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a FIFO"));
}

#[test]
fn a_fifo_nobody_writes_to_is_refused_not_waited_on_forever() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("nobody.fifo");
    mkfifo(&fifo);
    let started = std::time::Instant::now();
    let out = extpath()
        .args(["import", fifo.to_str().unwrap()])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a FIFO that nothing wrote to within 10 s"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// `replay serve` without --kubeconfig-out: the kubeconfig path it printed, the child, and the
/// lines it printed.
fn serve(args: &[&str]) -> (std::process::Child, PathBuf, Vec<String>) {
    let mut child = Command::new(bin())
        .current_dir(repo())
        .args(["replay", "serve"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut kubeconfig = None;
    let mut lines = Vec::new();
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(p) = line.strip_prefix("export KUBECONFIG=") {
            kubeconfig = Some(PathBuf::from(p));
        }
        let done = line.starts_with("press Ctrl-C");
        lines.push(line);
        if done {
            break;
        }
    }
    (child, kubeconfig.expect("the kubeconfig line"), lines)
}

#[test]
fn replay_serve_removes_its_admin_kubeconfig_when_stopped() {
    use std::os::unix::fs::PermissionsExt;
    for (signal, args) in [
        (
            libc::SIGINT,
            vec!["fixtures/scenarios/healthy.yaml", "--idle"],
        ),
        (
            libc::SIGTERM,
            vec!["--bundle", "fixtures/bundles/agg-tls.yaml"],
        ),
    ] {
        let (mut child, kubeconfig, lines) = serve(&args);
        let dir = kubeconfig.parent().unwrap().to_path_buf();
        let text = std::fs::read_to_string(&kubeconfig).unwrap();
        assert!(text.contains("token"), "an admin credential: {text}");
        let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "readable by its owner only");
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{signal}: {lines:?}");
        assert!(
            !kubeconfig.exists(),
            "{signal}: {} removed",
            kubeconfig.display()
        );
        assert!(!dir.exists(), "{signal}: {} removed", dir.display());
    }
}

/// What the krew caveats promise is what a collection sends: GET (lists and watches are GETs), a
/// server-side dry-run POST only with --probe-admission, and impersonation only as the delegation
/// and authorizer probes' users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_sends_what_the_caveats_say() {
    use crate::util::{Files, run, start};
    for (scenario, extra) in [
        ("healthy", vec![]),
        (
            "admission-webhook-down-ignore",
            vec!["--probe-admission", "-n", "wh-guarded"],
        ),
    ] {
        let server = start(scenario).await;
        let f = Files::new();
        let kc = f.write(
            "kubeconfig",
            &server.kubeconfig(extpath::refserver::ClientAuth::Token),
        );
        let mut args = vec![
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
        ];
        args.extend(extra.iter().copied());
        let home = f.path().to_path_buf();
        let owned: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let r = tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = owned.iter().map(String::as_str).collect();
            run(&home, &a, &[])
        })
        .await
        .unwrap();
        assert_eq!(r.code, 0, "{scenario}: {}", r.stderr);
        let sent: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|q| !q.traffic)
            .collect();
        assert!(!sent.is_empty());
        for q in &sent {
            match q.method.as_str() {
                "GET" => {}
                "POST" => assert!(
                    !extra.is_empty() && q.path.contains("dryRun=All"),
                    "{scenario}: a write only as an asked-for dry run: {}",
                    q.path
                ),
                other => panic!("{scenario}: {other} {}", q.path),
            }
            assert!(
                q.user == "admin"
                    || q.user == "extpath:delegation-probe"
                    || (q.user == "extpath:authorizer-probe"
                        && q.path == "/api/v1/namespaces/extpath-authorizer-probe"),
                "{scenario}: sent as {} to {}",
                q.user,
                q.path
            );
        }
        if scenario == "healthy" {
            assert!(
                sent.iter()
                    .any(|q| q.user == "extpath:delegation-probe" && q.method == "GET"),
                "the delegation probe impersonates by default"
            );
            assert!(
                sent.iter()
                    .any(|q| q.user == "extpath:authorizer-probe" && q.method == "GET"),
                "the authorizer probe impersonates by default"
            );
        }
        server.shutdown().await;
    }
}

/// `-v` levels are distinct: 1 adds step times, 2 a line per request, 3 the headers of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_verbosity_level_adds_what_its_help_says() {
    use crate::util::{Files, run, start};
    let server = start("healthy").await;
    let f = Files::new();
    let kc = f.write(
        "kubeconfig",
        &server.kubeconfig(extpath::refserver::ClientAuth::Token),
    );
    let kc = kc.to_str().unwrap().to_string();
    let home = f.path().to_path_buf();
    let stderr = tokio::task::spawn_blocking(move || {
        ["0", "1", "2", "3"].map(|v| {
            let r = run(
                &home,
                &["collect", "--kubeconfig", &kc, "--window", "0", "-v", v],
                &[],
            );
            assert_eq!(r.code, 0, "-v {v}: {}", r.stderr);
            r.stderr
        })
    })
    .await
    .unwrap();
    let [v0, v1, v2, v3] = &stderr;
    assert!(v0.is_empty(), "-v 0 on a pipe: nothing: {v0}");
    let step = |t: &str| {
        t.lines()
            .any(|l| l.contains("] done ") && l.ends_with(": APIServices"))
    };
    let request = |t: &str| {
        t.lines().any(|l| {
            l.contains("] GET /apis/apiregistration.k8s.io/v1/apiservices?limit=500 200 in ")
        })
    };
    let headers = |t: &str| t.lines().any(|l| l.contains(" priority-level-uid="));
    assert!(step(v1) && !request(v1), "-v 1: steps only:\n{v1}");
    assert!(
        step(v2) && request(v2) && !headers(v2),
        "-v 2: requests:\n{v2}"
    );
    assert!(
        step(v3) && request(v3) && headers(v3),
        "-v 3: headers:\n{v3}"
    );
    server.shutdown().await;
}

/// `version` names the server's version when it answers, and says why not when it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_names_the_server_when_it_can() {
    use crate::util::{Files, run, start};
    let server = start("healthy").await;
    let f = Files::new();
    let kc = f.write(
        "kubeconfig",
        &server.kubeconfig(extpath::refserver::ClientAuth::Token),
    );
    let kc = kc.to_str().unwrap().to_string();
    let other = extpath::pki::generate::TestCa::new(
        "some-other-ca",
        extpath::pki::generate::Validity::around(jiff::Timestamp::now(), 1, 30),
    )
    .unwrap();
    let other_ca = f.write("other-ca.crt", &other.cert_pem);
    let other_ca = other_ca.to_str().unwrap().to_string();
    let home = f.path().to_path_buf();
    let (text, json, no_ca, wrong_ca) = tokio::task::spawn_blocking(move || {
        let text = run(&home, &["version", "--kubeconfig", &kc], &[]);
        let json = run(&home, &["version", "--kubeconfig", &kc, "-o", "json"], &[]);
        // The same server without the CA that signed it: said in kubectl's words, still exit 0.
        let no_ca = run(
            &home,
            &[
                "version",
                "--kubeconfig",
                &kc,
                "--certificate-authority",
                "/dev/null",
            ],
            &[],
        );
        let wrong_ca = run(
            &home,
            &[
                "version",
                "--kubeconfig",
                &kc,
                "--certificate-authority",
                &other_ca,
            ],
            &[],
        );
        (text, json, no_ca, wrong_ca)
    })
    .await
    .unwrap();
    assert_eq!(text.code, 0, "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(lines[0].starts_with("Client Version: v"), "{}", text.stdout);
    assert!(lines[1].starts_with("Rules: "), "{}", text.stdout);
    assert!(
        lines[2].starts_with("Server Version: v1."),
        "{}",
        text.stdout
    );
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        doc["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.")
    );
    assert!(doc["rules"]["bundled"].as_u64().unwrap() > 100);
    assert!(doc.get("serverError").is_none());
    // /dev/null holds no certificate: an input error, like every other command's.
    assert_eq!(no_ca.code, 2, "{}", no_ca.stderr);
    assert_eq!(wrong_ca.code, 0, "{}", wrong_ca.stderr);
    assert!(
        wrong_ca.stdout.contains(
            "Server Version: not available: Unable to connect to the server: tls: failed to \
             verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        wrong_ca.stdout
    );
    server.shutdown().await;
}
