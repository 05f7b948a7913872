//! The krew manifest and its packaging script: the manifest names this version and files that
//! exist, and `deploy/krew/package` builds an archive holding exactly what the manifest installs,
//! with the archive's real checksum written into the manifest copy.

use std::process::Command;

use serde_json::Value;
use sha2::Digest;

use crate::util::repo;

fn manifest() -> Value {
    let text = std::fs::read_to_string(repo().join("deploy/krew/extpath.yaml")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn platforms(m: &Value) -> &Vec<Value> {
    m["spec"]["platforms"].as_array().unwrap()
}

#[test]
fn the_manifest_names_this_version_and_files_that_exist() {
    let m = manifest();
    assert_eq!(
        m["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(m["kind"], "Plugin");
    assert_eq!(m["metadata"]["name"], "extpath");
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(m["spec"]["version"], version.as_str());
    assert!(!platforms(&m).is_empty());
    for p in platforms(&m) {
        let uri = p["uri"].as_str().unwrap();
        assert!(
            uri.contains(&format!("/{version}/kubectl-extpath-{version}-")),
            "{uri}"
        );
        assert_eq!(p["bin"], "kubectl-extpath");
        assert_eq!(p["sha256"].as_str().unwrap().len(), 64);
        // Every archive ships the completion shim, installed beside the binary.
        assert!(
            p["files"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| { f["from"] == "completions/kubectl_complete-extpath" && f["to"] == "." }),
            "{uri}: the kubectl_complete-extpath shim"
        );
        for f in p["files"].as_array().unwrap() {
            let from = f["from"].as_str().unwrap();
            assert!(
                from == "kubectl-extpath" || repo().join(from).is_file(),
                "{from} is not in the repository"
            );
        }
    }
}

#[test]
fn the_caveats_say_what_is_sent_and_how_to_install_the_shim() {
    let m = manifest();
    let caveats = m["spec"]["caveats"].as_str().unwrap();
    let flat = caveats.split_whitespace().collect::<Vec<_>>().join(" ");
    // The read-only promise, as the collection keeps it: GET/LIST/WATCH, the delegation probe's
    // impersonation (on by default), and dry-run writes only when asked.
    for said in [
        "GET, LIST and WATCH",
        "impersonating an ordinary user",
        "Impersonate-User: extpath:delegation-probe",
        "Impersonate-User: extpath:authorizer-probe",
        "--skip-delegation-probe",
        "--probe-admission",
        "dry-run",
        "store nothing",
    ] {
        assert!(flat.contains(said), "caveats say {said:?}: {caveats}");
    }
    assert!(!flat.contains("only reads"), "{caveats}");
    // The shim goes on PATH from where krew installed this version.
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert!(
        flat.contains(&format!("store/extpath/{version}/kubectl_complete-extpath")),
        "{caveats}"
    );
    assert!(flat.contains("/.krew}/bin/"), "{caveats}");
    // What the caveats promise is what the collection's own documentation says it sends.
    let probe = std::fs::read_to_string(repo().join("src/collect/delegation.rs")).unwrap();
    assert!(probe.contains("extpath:delegation-probe"));
    let probe = std::fs::read_to_string(repo().join("src/collect/authorizer.rs")).unwrap();
    assert!(probe.contains("extpath:authorizer-probe"));
}

#[test]
fn package_builds_the_archive_the_manifest_describes_and_fills_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let target = "x86_64-unknown-linux-musl";
    let out = Command::new(repo().join("deploy/krew/package"))
        .arg(env!("CARGO_BIN_EXE_kubectl-extpath"))
        .arg(target)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let archive = dir.path().join(format!(
        "kubectl-extpath-v{}-{target}.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    let sum = hex(&sha2::Sha256::digest(std::fs::read(&archive).unwrap()));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&sum));

    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let filled: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.path().join("extpath.yaml")).unwrap())
            .unwrap();
    let platform = platforms(&filled)
        .iter()
        .find(|p| {
            p["uri"]
                .as_str()
                .unwrap()
                .ends_with(&format!("{target}.tar.gz"))
        })
        .unwrap();
    assert_eq!(platform["sha256"], sum.as_str());
    for f in platform["files"].as_array().unwrap() {
        let from = f["from"].as_str().unwrap();
        assert!(
            listing.lines().any(|l| l.trim_start_matches("./") == from),
            "{from} not in the archive:\n{listing}"
        );
    }
    // The other platforms keep their placeholders: only this archive was built.
    assert!(
        platforms(&filled)
            .iter()
            .filter(|p| p != &platform)
            .all(|p| p["sha256"].as_str().unwrap().chars().all(|c| c == '0'))
    );

    let bad = Command::new(repo().join("deploy/krew/package"))
        .arg(env!("CARGO_BIN_EXE_kubectl-extpath"))
        .arg("riscv64-unknown-none")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("has no platform"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
