//! `analyze --raw DIR` never dies of one file inside the directory: a file (or an item of one)
//! that cannot be read as its kind is an `unreadable` gap naming the file, the line and the
//! reason, and the rest of the folder still gives verdicts. The same file named on the command
//! line, and the folder under `--strict`, exit 2 with one line `file:line: message`.

use std::path::{Path, PathBuf};

use extpath::bundle::Kind;
use extpath::bundle::raw::{ImportOptions, import_paths_with};
use extpath::bundle::{EvidenceBundle, GapReason};

use crate::util::{extpath, repo};

fn run(args: &[&str], paths: &[&Path]) -> (i32, String, String) {
    let mut cmd = extpath();
    cmd.args(args);
    cmd.arg("--raw");
    for p in paths {
        cmd.arg(p);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// A copy of a real capture to spoil.
fn copy_case(case: &str, to: &Path) {
    for e in std::fs::read_dir(repo().join("fixtures/raw").join(case)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// An error as the CLI prints it: one line, naming the file (and line), never Rust `Debug`.
fn assert_one_line_error(code: i32, stdout: &str, stderr: &str, needles: &[&str]) {
    assert_eq!(code, 2, "exit code; stderr: {stderr}");
    assert!(stdout.is_empty(), "nothing on stdout: {stdout}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    for debug in [
        "Malformed {",
        "Io {",
        "RawImportError",
        "FileError",
        "panicked",
    ] {
        assert!(!stderr.contains(debug), "no Debug output: {stderr}");
    }
    for n in needles {
        assert!(stderr.contains(n), "says {n:?}: {stderr}");
    }
}

fn import_lenient(dir: &Path, opts: ImportOptions) -> EvidenceBundle {
    import_paths_with(
        &[dir.to_path_buf()],
        "2030-01-01T00:00:00Z".parse().unwrap(),
        opts,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn unreadable_gap<'b>(b: &'b EvidenceBundle, file: &str) -> &'b extpath::bundle::Gap {
    b.gaps
        .iter()
        .find(|g| g.reason == GapReason::Unreadable && g.source.ends_with(file))
        .unwrap_or_else(|| panic!("an unreadable gap for {file}: {:#?}", b.gaps))
}

/// The acceptance test of the class fix: a malformed file inside a real capture is a gap and the
/// verdicts are those of the capture; named directly, or under `--strict`, it is exit 2.
#[test]
fn a_malformed_file_inside_a_folder_is_a_gap_named_directly_or_strict_it_is_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("case");
    std::fs::create_dir(&dir).unwrap();
    copy_case("09-validating-webhook-unreachable", &dir);
    let bad = write(
        &dir,
        "more-apiservices.json",
        "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\n            \"kind\": \"APIService\",\n",
    );

    // Inside the folder: exit by verdicts (the capture's critical Admission verdict), the file a gap.
    let (code, stdout, stderr) = run(&["analyze", "-o", "json"], &[&dir]);
    assert_eq!(code, 1, "exit by verdicts: {stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let verdicts = doc["verdicts"].as_array().unwrap();
    assert!(
        verdicts
            .iter()
            .any(|v| v["class"] == "Admission" && v["severity"] == "critical"),
        "the rest of the folder still gives its verdict: {verdicts:#?}"
    );
    let gap = doc["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "unreadable")
        .expect("an unreadable gap");
    let detail = gap["detail"].as_str().unwrap();
    assert!(
        gap["source"]
            .as_str()
            .unwrap()
            .ends_with("more-apiservices.json"),
        "{gap}"
    );
    assert!(
        detail.contains("more-apiservices.json:6: malformed JSON"),
        "file, line and reason: {detail}"
    );

    // Named directly: exit 2, one line naming the file and the line.
    let (code, stdout, stderr) = run(&["analyze"], &[&bad]);
    assert_one_line_error(
        code,
        &stdout,
        &stderr,
        &["more-apiservices.json:6: malformed JSON"],
    );

    // The folder under --strict, for analyze and import: exit 2, the same line.
    let (code, stdout, stderr) = run(&["analyze", "--strict"], &[&dir]);
    assert_one_line_error(
        code,
        &stdout,
        &stderr,
        &["more-apiservices.json:6: malformed JSON"],
    );
    let (code, stdout, stderr) = run(&["import", "--strict"], &[&dir]);
    assert_one_line_error(
        code,
        &stdout,
        &stderr,
        &["more-apiservices.json:6: malformed JSON"],
    );
    // Without --strict, import prints the bundle with the gap.
    let (code, stdout, stderr) = run(&["import"], &[&dir]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("reason: unreadable"), "{stdout}");
}

/// `--strict` only makes sense with `--raw`.
#[test]
fn strict_needs_raw() {
    let out = extpath()
        .args(["analyze", "--strict", "bundle.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// An object of a List that does not validate is a gap naming the item; the others are kept.
/// Named directly, the file is an error naming the item.
#[test]
fn a_bad_item_of_a_list_is_a_gap_and_the_other_items_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let list = write(
        tmp.path(),
        "services.json",
        r#"{
    "apiVersion": "v1",
    "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "good", "namespace": "x"}, "spec": {"ports": [{"port": 443}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad", "namespace": "x"}, "spec": {"ports": "443"}}
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
"#,
    );
    let b = import_lenient(tmp.path(), ImportOptions::default());
    assert_eq!(b.services.len(), 1);
    assert_eq!(b.services[0].name, "good");
    let gap = unreadable_gap(&b, "services.json");
    assert!(
        gap.detail.contains("items[1]: Service \"bad\""),
        "{}",
        gap.detail
    );
    let (code, stdout, stderr) = run(&["import"], &[&list]);
    assert_one_line_error(
        code,
        &stdout,
        &stderr,
        &["services.json", "items[1]: Service \"bad\""],
    );
}

/// A text file with a stray byte that is not UTF-8 (a Latin-1 name in a log) is read with the
/// byte replaced and a gap naming its line; a binary file is only skipped; named directly, the
/// text file is an error naming the line.
#[test]
fn invalid_utf8_in_a_text_file_is_named_by_line_and_the_rest_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = b"W1129 08:52:51.389447   32417 dispatcher.go:153] Failed calling webhook, failing closed vwh.example.com: failed calling webhook \"vwh.example.com\": failed to call webhook: Post \"https://127.0.0.1:9444/validate?timeout=5s\": dial tcp 127.0.0.1:9444: connect: connection refused\n".to_vec();
    log.extend_from_slice(b"I1129 08:52:52.000000   32417 x.go:1] user Jos\xe9 logged in\n");
    let log = write(tmp.path(), "kas.log", &log);
    write(
        tmp.path(),
        "core",
        [0x7f, b'E', b'L', b'F', 0, 0, 0x9c, 0x80],
    );
    let b = import_lenient(tmp.path(), ImportOptions::default());
    assert!(
        b.log_findings
            .iter()
            .any(|f| f.pattern == "webhook-failing-closed")
    );
    let gap = unreadable_gap(&b, "kas.log");
    assert!(
        gap.detail.contains("kas.log:2: invalid UTF-8"),
        "{}",
        gap.detail
    );
    assert!(
        b.gaps
            .iter()
            .any(|g| g.reason == GapReason::Skipped && g.source.ends_with("core"))
    );
    let (code, stdout, stderr) = run(&["import"], &[&log]);
    assert_one_line_error(code, &stdout, &stderr, &["kas.log:2: not a text file"]);
}

/// A file too large to read, or one that cannot be opened, is a gap inside a directory.
#[test]
fn too_large_or_unopenable_files_inside_a_directory_are_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "readyz.txt",
        "[+]ping ok\n[+]etcd ok\n[+]poststarthook/start-apiextensions-controllers ok\nreadyz check passed\n",
    );
    write(
        tmp.path(),
        "big.log",
        "I1129 08:52:52.000000   32417 x.go:1] hello\n".repeat(100),
    );
    let b = import_lenient(
        tmp.path(),
        ImportOptions {
            max_text_bytes: 1024,
            ..ImportOptions::default()
        },
    );
    assert!(unreadable_gap(&b, "big.log").detail.contains("too large"));
    assert_eq!(b.health_checks.len(), 1);
    let strict = import_paths_with(
        &[tmp.path().to_path_buf()],
        "2030-01-01T00:00:00Z".parse().unwrap(),
        ImportOptions {
            strict: true,
            max_text_bytes: 1024,
        },
    );
    assert!(
        strict
            .unwrap_err()
            .to_string()
            .contains("big.log: too large")
    );

    // A dangling symlink is not a file; a file without read permission is (when not root).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let locked = write(tmp.path(), "locked.json", "{}\n");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read(&locked).is_err() {
            let b = import_lenient(tmp.path(), ImportOptions::default());
            assert!(
                unreadable_gap(&b, "locked.json")
                    .detail
                    .contains("cannot read")
            );
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// A folder where nothing could be used is still an error, and says why.
#[test]
fn a_folder_of_only_unreadable_files_is_exit_2_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "a.json", "{\n  \"kind\": \"List\",\n");
    write(tmp.path(), "notes.txt", "we restarted it\n");
    let (code, stdout, stderr) = run(&["analyze"], &[tmp.path()]);
    assert_one_line_error(
        code,
        &stdout,
        &stderr,
        &[
            "no usable file in this directory",
            "a.json:3: malformed JSON",
        ],
    );
}

/// Each incident folder of a mis-detection class imports without an unreadable gap: the class
/// fix is in detection, not only in tolerance.
#[test]
fn the_misdetection_fixtures_are_read_as_what_they_are() {
    let root = repo().join("fixtures/incidents");
    let b = import_lenient(
        &root.join("etcd-stalled-log-excerpt"),
        ImportOptions {
            strict: true,
            ..ImportOptions::default()
        },
    );
    assert!(b.gaps.iter().all(|g| g.reason != GapReason::Unreadable));
    // The startup excerpt is a log, not a failing readyz listing.
    assert_eq!(b.health_checks.len(), 1, "{:#?}", b.health_checks);
    assert!(b.log_findings.iter().any(|f| {
        f.pattern == "etcd-health-failed"
            && f.origin
                .as_deref()
                .is_some_and(|o| o.ends_with("kube-apiserver.log"))
    }));

    let b = import_lenient(
        &root.join("auth-reader-missing-configmap-dumps"),
        ImportOptions {
            strict: true,
            ..ImportOptions::default()
        },
    );
    let owned: Vec<&str> = b
        .certificates
        .iter()
        .filter(|c| {
            c.origin.owner.as_ref().is_some_and(|o| {
                o.kind == Kind::ConfigMap && o.name == "extension-apiserver-authentication"
            })
        })
        .map(|c| c.subject.as_str())
        .collect();
    assert_eq!(owned, ["CN=kube-ca", "CN=front-proxy-ca"]);
    assert!(b.certificates.iter().all(|c| c.origin.source
        != extpath::bundle::CertSource::ServedChain
        && c.verification.is_none()));
}
