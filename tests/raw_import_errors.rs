//! `import --raw` on bad input: one line naming the file (and line), exit code 2, never a panic;
//! and on secret-bearing input: nothing secret reaches the bundle.

use std::path::Path;

use crate::util::extpath;

fn run(args: &[&Path]) -> (i32, String, String) {
    let mut cmd = extpath();
    cmd.args(["import", "-o", "yaml", "--raw"]);
    for a in args {
        cmd.arg(a);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_input_error(path: &Path, needle: &str) {
    let (code, stdout, stderr) = run(&[path]);
    let name = path.file_name().unwrap().to_string_lossy();
    assert_eq!(code, 2, "{name}: exit code; stderr: {stderr}");
    assert!(stdout.is_empty(), "{name}: no bundle on stdout");
    assert!(!stderr.contains("panicked"), "{name}: panic: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{name}: one line: {stderr}"
    );
    assert!(
        stderr.contains(name.as_ref()),
        "{name}: names the file: {stderr}"
    );
    assert!(stderr.contains(needle), "{name}: says {needle:?}: {stderr}");
}

fn write(dir: &Path, name: &str, content: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

// A file named on the command line was chosen by the user: if it cannot be used, that is an input
// error to fix (exit 2, naming it), not something to skip quietly and then diagnose without.
#[test]
fn bad_raw_inputs_exit_2_with_one_line_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();

    let useless = d.join("useless");
    std::fs::create_dir(&useless).unwrap();
    write(&useless, "notes.txt", b"we restarted the pod twice\n");
    write(&useless, "empty.json", b"");
    assert_input_error(&useless, "no usable file");

    let unknown = write(d, "notes.txt", b"we restarted the pod twice\n");
    assert_input_error(&unknown, "not a kind of file extpath imports");

    let table = write(
        d,
        "apiservices.txt",
        b"NAME   SERVICE   AVAILABLE   AGE\nv1.   Local   True   5m\n",
    );
    assert_input_error(&table, "use -o json");

    let json = write(
        d,
        "apiservices.json",
        b"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    {\"kind\": \"APIService\",\n",
    );
    assert_input_error(&json, "apiservices.json:6: malformed JSON");

    let wrong_type = write(
        d,
        "svc.json",
        br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"api","namespace":"x"},"spec":{"ports":"443"}}"#,
    );
    assert_input_error(&wrong_type, "Service \"api\"");

    let metrics = write(
        d,
        "metrics.txt",
        b"# TYPE aggregator_unavailable_apiservice gauge\naggregator_unavailable_apiservice{name=\"v1.x\" 1\n",
    );
    assert_input_error(&metrics, "metrics.txt:2: malformed metrics");

    let pem = write(
        d,
        "ca.crt",
        b"-----BEGIN CERTIFICATE-----\nMIIDgTCCAmmgAwIBAgIUd5xmdkCIlh3VA5Q8D3xD4k4GdcUwDQYJKoZIhvcNAQEL\n",
    );
    assert_input_error(&pem, "ca.crt:1: truncated PEM");

    let random = write(
        d,
        "core.bin",
        &[0x7f, 0x45, 0x4c, 0x46, 0xff, 0xfe, 0x00, 0x9c, 0x80],
    );
    assert_input_error(&random, "not a text file");

    let empty = write(d, "empty.yaml", b"");
    assert_input_error(&empty, "empty file");

    let missing = d.join("missing.json");
    assert_input_error(&missing, "cannot read");
}

// Inside a directory the opposite holds: support folders carry notes, screenshots and READMEs
// next to the dumps, and one of them must not cost the rest. It is skipped and said so in a gap.
#[test]
fn an_unknown_file_inside_a_directory_is_a_skipped_gap() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "notes.txt", b"we restarted the pod twice\n");
    write(
        tmp.path(),
        "readyz.txt",
        b"[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n",
    );
    let (code, stdout, stderr) = run(&[tmp.path()]);
    assert_eq!(code, 0, "{stderr}");
    let b: extpath::bundle::EvidenceBundle = serde_saphyr::from_str(&stdout).unwrap();
    let gap = b
        .gaps
        .iter()
        .find(|g| g.source.ends_with("notes.txt"))
        .expect("a gap for the unknown file");
    assert_eq!(gap.reason, extpath::bundle::GapReason::Skipped);
    assert!(!b.health_checks[0].ok);
}

// A namespace export (`kubectl get configmaps,secrets,… -o json`) sweeps Secrets in with the rest,
// and bundles are attached to tickets: Secret data, tokens and keys must be dropped on import,
// whatever the shape they arrive in (DESIGN §2).
#[test]
fn secrets_never_reach_the_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A Secret among other objects.
    write(
        d,
        "objects.json",
        br#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"x"},
             "data":{"token":"c3VwZXItc2VjcmV0LXRva2Vu"},"stringData":{"password":"hunter2-secret"}},
            {"apiVersion":"v1","kind":"Service","metadata":{"name":"api","namespace":"x"},
             "spec":{"ports":[{"port":443}]}}]}"#,
    );
    // A -v9 trace: request headers carry a bearer token.
    write(
        d,
        "trace.stderr",
        b"I1129 08:42:19.962409    1025 round_trippers.go:466] curl -v -XGET  -H \"Authorization: Bearer abcdef-real-token\" 'https://127.0.0.1:6443/apis/x.example.com/v1'\n\
I1129 08:42:19.963000    1025 round_trippers.go:553] GET https://127.0.0.1:6443/apis/x.example.com/v1\n\
I1129 08:42:19.963100    1025 round_trippers.go:570] Request Headers:\n\
I1129 08:42:19.963200    1025 round_trippers.go:573]     Authorization: Bearer abcdef-real-token\n\
I1129 08:42:19.964000    1025 round_trippers.go:574] Response Status: 429 Too Many Requests in 1 milliseconds\n\
I1129 08:42:19.964100    1025 round_trippers.go:577] Response Headers:\n\
I1129 08:42:19.964200    1025 round_trippers.go:580]     Retry-After: 1\n\
I1129 08:42:19.964300    1025 round_trippers.go:580]     Audit-Id: 1234\n",
    );
    // A private key next to a certificate, and a key alone.
    let cert = std::fs::read(crate::util::repo().join("fixtures/raw/00-healthy/certs/wardle.crt"))
        .unwrap();
    let mut with_key = b"-----BEGIN PRIVATE KEY-----\nTUlJRXZnSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2d3Z2dTa0FnRUFBb0lCQVFD\n-----END PRIVATE KEY-----\n".to_vec();
    with_key.extend_from_slice(&cert);
    write(d, "served.pem", &with_key);
    write(
        d,
        "tls.key",
        b"-----BEGIN RSA PRIVATE KEY-----\nTUlJRXBBSUJBQUtDQVFFQTBaM1ZTMHJ1bnRpbWUtc2VjcmV0\n-----END RSA PRIVATE KEY-----\n",
    );
    let (code, stdout, stderr) = run(&[d]);
    assert_eq!(code, 0, "{stderr}");
    for secret in [
        "c3VwZXItc2VjcmV0LXRva2Vu",
        "hunter2",
        "abcdef-real-token",
        "Authorization",
        "PRIVATE KEY",
        "TUlJRX",
    ] {
        assert!(!stdout.contains(secret), "{secret} leaked into the bundle");
    }
    let b: extpath::bundle::EvidenceBundle = serde_saphyr::from_str(&stdout).unwrap();
    assert_eq!(
        b.services.len(),
        1,
        "the Service is kept, the Secret is not"
    );
    let p = &b.probes[0];
    assert_eq!(p.status, Some(429));
    assert_eq!(p.headers.retry_after.as_deref(), Some("1"));
    assert_eq!(p.headers.audit_id.as_deref(), Some("1234"));
    assert_eq!(b.certificates.len(), 1);
}
