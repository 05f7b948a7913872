//! `import FILE`: the bundle loader's error contract (one line naming the file, exit 2, no panic).

use crate::util::extpath;

fn import_of(name: &str, content: &[u8]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    let out = extpath().arg("import").arg(&path).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_input_error(name: &str, content: &[u8], needle: &str) {
    let (code, _, stderr) = import_of(name, content);
    assert_eq!(code, 2, "{name}: exit code, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{name}: panic: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{name}: one line: {stderr}"
    );
    assert!(stderr.contains(name), "{name}: names the file: {stderr}");
    assert!(stderr.contains(needle), "{name}: says {needle:?}: {stderr}");
}

const MINIMAL: &str =
    "apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\ncollection:\n  tool_version: 0.1.0\n";

// A bundle is attached to an incident and analysed elsewhere (DESIGN §2), often after someone
// converted it for a tool of theirs: YAML → JSON → YAML must give back the same document.
#[test]
fn a_minimal_bundle_round_trips_through_yaml_and_json() {
    let (code, yaml, stderr) = import_of("b.yaml", MINIMAL.as_bytes());
    assert_eq!(code, 0, "{stderr}");
    assert!(yaml.contains("kind: EvidenceBundle"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.yaml");
    std::fs::write(&path, MINIMAL).unwrap();
    let out = extpath()
        .args(["import", "-o", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kind"], "EvidenceBundle");
    let jpath = dir.path().join("b.json");
    std::fs::write(&jpath, &out.stdout).unwrap();
    let back = extpath().arg("import").arg(&jpath).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&back.stdout), yaml);
}

// Each input is a real way a bundle goes wrong on its way to `analyze`: an empty file (a failed
// `collect … > b.yaml` still creates it), a binary (an archive attached by mistake), an upload
// cut short, a bundle from a newer release, a kubectl List where a bundle was expected (the hint
// points to `--raw`), a hand edit with a typo'd field, and nesting deep enough to overflow a
// recursive parser. All must be exit 2 and one line naming the file (DESIGN §5), never a panic.
#[test]
fn bad_bundles_exit_2_with_one_line_naming_the_file() {
    assert_input_error("empty.yaml", b"", "empty file");
    assert_input_error(
        "random.bin",
        &[0xff, 0xfe, 0x00, 0x9c, 0x80, 0x81],
        "not a text file",
    );
    assert_input_error(
        "truncated.yaml",
        b"apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\ncollection:\n  tool_version: [0.1",
        "truncated.yaml:",
    );
    assert_input_error(
        "wrong-version.yaml",
        b"apiVersion: extpath.dev/v9\nkind: EvidenceBundle\ncollection:\n  tool_version: x\n",
        "expected apiVersion",
    );
    assert_input_error(
        "wrong-kind.json",
        br#"{"apiVersion":"v1","kind":"List","items":[]}"#,
        "import --raw",
    );
    let unknown = format!("{MINIMAL}surprise: 1\n");
    assert_input_error("unknown-field.yaml", unknown.as_bytes(), "surprise");
    let deep_json = "[".repeat(200_000);
    assert_input_error(
        "deep.json",
        format!("{{\"a\":{deep_json}").as_bytes(),
        "deep.json",
    );
    let deep_yaml = "[".repeat(200_000);
    assert_input_error(
        "deep.yaml",
        format!("a: {deep_yaml}").as_bytes(),
        "deep.yaml",
    );
}
