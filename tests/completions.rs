//! Shell completions: the clap definition is sound, the checked-in scripts equal the generated
//! ones, and `kubectl extpath <TAB>` works through the real kubectl, the real shim and the real
//! binary.

use std::path::Path;

use clap::CommandFactory;
use extpath::cli::Cli;
use extpath::cli::completions::{
    DIRECTIVE_DEFAULT, DIRECTIVE_NO_FILE_COMP, checked_in_files, complete,
};

use super::util::{extpath, repo};

#[test]
fn the_command_line_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn checked_in_completions_match_the_current_cli() {
    let update = std::env::var_os("UPDATE_COMPLETIONS").is_some();
    let mut stale = Vec::new();
    for (rel, generated) in checked_in_files() {
        let path = repo().join(rel);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
            if rel.ends_with("kubectl_complete-extpath") {
                set_executable(&path);
            }
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(current) if current == generated => {}
            _ => stale.push(rel),
        }
    }
    assert!(
        stale.is_empty(),
        "completion files are out of date with the CLI: {stale:?}\n\
         regenerate them with: UPDATE_COMPLETIONS=1 cargo test --test main completions"
    );
    assert!(
        is_executable(&repo().join("completions/kubectl_complete-extpath")),
        "completions/kubectl_complete-extpath must be executable (kubectl only runs executables)"
    );
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

fn values(ws: &[&str]) -> (Vec<String>, u32) {
    let c = complete(&Cli::command(), &words(ws));
    (
        c.candidates.into_iter().map(|c| c.value).collect(),
        c.directive,
    )
}

#[test]
fn subcommands_are_offered_and_hidden_ones_are_not() {
    let (vals, directive) = values(&[""]);
    assert!(vals.contains(&"import".to_string()), "{vals:?}");
    assert!(vals.contains(&"completions".to_string()), "{vals:?}");
    assert!(!vals.iter().any(|v| v == "__complete"), "{vals:?}");
    assert_eq!(directive, DIRECTIVE_NO_FILE_COMP);
    assert_eq!(values(&["comp"]).0, ["completions"]);
    // With no words at all the answer is the same as for an empty word.
    assert_eq!(complete(&Cli::command(), &[]).candidates.len(), vals.len());
}

#[test]
fn value_enums_flags_and_paths_complete_like_clap_parses_them() {
    assert_eq!(
        values(&["completions", ""]).0,
        ["bash", "zsh", "fish", "kubectl"]
    );
    assert_eq!(values(&["import", "-o", ""]).0, ["yaml", "json"]);
    assert_eq!(values(&["import", "--output", "j"]).0, ["json"]);
    assert_eq!(values(&["import", "--output=y"]).0, ["--output=yaml"]);
    let (flags, _) = values(&["import", "--"]);
    assert!(flags.contains(&"--output".to_string()), "{flags:?}");
    // A flag already given is not offered again.
    let (flags, _) = values(&["import", "-ojson", "--"]);
    assert!(!flags.contains(&"--output".to_string()), "{flags:?}");
    // The bundle FILE is a path: no candidates, let the shell complete file names.
    assert_eq!(values(&["import", ""]), (vec![], DIRECTIVE_DEFAULT));
    assert_eq!(
        values(&["import", "-o", "json", ""]),
        (vec![], DIRECTIVE_DEFAULT)
    );
    // After the FILE there is nothing left to complete.
    assert_eq!(
        values(&["import", "b.yaml", ""]),
        (vec![], DIRECTIVE_NO_FILE_COMP)
    );
}

#[test]
fn the_binary_answers_cobras_protocol() {
    let out = extpath()
        .args(["__complete", "--", "completions", "z"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("zsh\t"),
        "value<TAB>description: {stdout}"
    );
    assert_eq!(lines[1], ":4");
    // Words that look like flags of `__complete` itself are completed, not obeyed.
    let out = extpath().args(["__complete", "--", "--"]).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("--version\t"), "{stdout}");
}

#[test]
fn bash_completes_subcommands_and_their_options() {
    // Drive the checked-in script the way bash's programmable completion calls it.
    let script = r#"
source "$1"
fn=$(complete -p kubectl-extpath | sed -E 's/.*-F ([^ ]+).*/\1/')
ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$fn" kubectl-extpath "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; echo "${COMPREPLY[*]}"; }
ask kubectl-extpath ''
ask kubectl-extpath import -o ''
ask kubectl-extpath completions ''
"#;
    let out = std::process::Command::new("bash")
        .args(["-c", script, "bash"])
        .arg(repo().join("completions/kubectl-extpath.bash"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].contains("import") && lines[0].contains("completions"),
        "{stdout}"
    );
    assert!(
        !lines[0].contains("__complete"),
        "hidden subcommands stay hidden: {stdout}"
    );
    assert_eq!(lines[1], "yaml json");
    assert!(lines[2].ends_with("bash zsh fish kubectl"), "{stdout}");
}

/// A PATH directory holding the built binary and the checked-in shim, as a user installs them.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-extpath");
    std::os::unix::fs::symlink(bin, dir.path().join("kubectl-extpath")).unwrap();
    let shim = dir.path().join("kubectl_complete-extpath");
    std::fs::copy(repo().join("completions/kubectl_complete-extpath"), &shim).unwrap();
    set_executable(&shim);
    dir
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

#[test]
fn the_shim_forwards_to_the_binary() {
    let dir = plugin_dir();
    let out = std::process::Command::new("sh")
        .arg(dir.path().join("kubectl_complete-extpath"))
        .args(["import", "-o", ""])
        .env("PATH", path_with(dir.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, "yaml\tYAML\njson\tJSON\n:4\n");
}

/// kubectl's client minor version (`32` for `1.32+`).
fn kubectl_minor() -> u32 {
    let out = std::process::Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .expect("kubectl is on PATH (the tests use the real one)");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kubectl version JSON");
    let minor = v["clientVersion"]["minor"].as_str().unwrap_or_default();
    minor.trim_end_matches('+').parse().unwrap_or(0)
}

#[test]
fn kubectl_completes_the_plugin_through_the_shim() {
    // Plugin completion arrived in kubectl 1.26 (kubernetes#105867); an older client has nothing
    // to test here.
    let minor = kubectl_minor();
    if minor < 26 {
        eprintln!("kubectl 1.{minor} predates plugin completion (1.26); not testing it");
        return;
    }
    let dir = plugin_dir();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .args(args)
            .env("PATH", path_with(dir.path()))
            .env("KUBECONFIG", dir.path().join("no-kubeconfig"))
            .output()
            .expect("kubectl is on PATH (the tests use the real one)");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = kubectl(&["__complete", "extpath", ""]);
    assert!(top.lines().any(|l| l.starts_with("import\t")), "{top}");
    assert!(top.lines().any(|l| l.starts_with("completions\t")), "{top}");
    assert!(top.ends_with(":4\n"), "{top}");
    let values = kubectl(&["__complete", "extpath", "import", "--output", ""]);
    assert!(values.starts_with("yaml\tYAML\njson\tJSON\n"), "{values}");
    let file = kubectl(&["__complete", "extpath", "import", ""]);
    assert!(file.ends_with(":0\n"), "file names for FILE: {file}");
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {server: \"https://127.0.0.1:6443\"}\n- name: staging\n  cluster: {server: \"https://127.0.0.1:6444\"}\nusers:\n- name: admin\n  user: {token: x}\ncontexts:\n- name: prod-admin\n  context: {cluster: prod, user: admin, namespace: payments}\n- name: staging-admin\n  context: {cluster: staging, user: admin, namespace: checkout}\ncurrent-context: prod-admin\n";

#[test]
fn values_known_only_at_run_time_complete_too() {
    // Rule ids where a rule is named, classes and severities, why's methods.
    assert_eq!(
        values(&["explain", "aggregation-tls-u"]).0,
        ["aggregation-tls-unknown-authority"]
    );
    assert!(
        values(&["explain", ""])
            .0
            .iter()
            .any(|v| v == "Aggregation")
    );
    for flag in ["--rule", "--skip-rule"] {
        let (v, directive) = values(&["analyze", "b.yaml", flag, "storage-etcd-no"]);
        assert_eq!(v, ["storage-etcd-no-leader"], "{flag}");
        assert_eq!(directive, DIRECTIVE_NO_FILE_COMP);
    }
    assert_eq!(
        values(&["scan", "--rule=watch-stream-b"]).0,
        ["--rule=watch-stream-broken"]
    );
    assert_eq!(values(&["scan", "--class", ""]).0.len(), 9);
    assert_eq!(values(&["scan", "--class", "Ag"]).0, ["Aggregation"]);
    assert_eq!(
        values(&["scan", "--fail-on", ""]).0,
        ["warning", "critical"]
    );
    assert_eq!(values(&["why", ""]).0, ["GET", "LIST", "WATCH"]);

    // A --rules DIR on the line adds its rules.
    let dir = tempfile::tempdir().unwrap();
    let rule = std::fs::read_to_string(
        repo().join("rules/aggregation/aggregation-apiservice-name-mismatch.yaml"),
    )
    .unwrap()
    .replace(
        "id: aggregation-apiservice-name-mismatch",
        "id: team-apiservice-naming",
    );
    std::fs::write(dir.path().join("team-apiservice-naming.yaml"), rule).unwrap();
    let rules_dir = dir.path().to_str().unwrap();
    assert_eq!(
        values(&["analyze", "--rules", rules_dir, "--rule", "team-"]).0,
        ["team-apiservice-naming"]
    );

    // Contexts, clusters, users and namespaces from the kubeconfig named on the line.
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, KUBECONFIG).unwrap();
    let kc = kc.to_str().unwrap();
    assert_eq!(
        values(&["scan", "--kubeconfig", kc, "--context", ""]).0,
        ["prod-admin", "staging-admin"]
    );
    // A fleet's comma-separated list: the last name completes, those listed are not offered again.
    assert_eq!(
        values(&["scan", "--kubeconfig", kc, "--context", "prod-admin,"]).0,
        ["prod-admin,staging-admin"]
    );
    assert_eq!(
        values(&["scan", "--kubeconfig", kc, "--context=staging-admin,p"]).0,
        ["--context=staging-admin,prod-admin"]
    );
    assert_eq!(
        values(&["collect", "--kubeconfig", kc, "-n", ""]).0,
        ["payments", "checkout"]
    );
    assert_eq!(
        values(&["why", "--kubeconfig", kc, "--cluster", "st"]).0,
        ["staging"]
    );
    assert_eq!(
        values(&["version", "--kubeconfig", kc, "--user", ""]).0,
        ["admin"]
    );
    // A kubeconfig that cannot be read completes nothing, and never fails.
    assert_eq!(
        values(&["scan", "--kubeconfig", "/nonexistent", "--context", ""]),
        (vec![], DIRECTIVE_NO_FILE_COMP)
    );
}

#[test]
fn kubectl_completes_contexts_and_rule_ids_through_the_shim() {
    let minor = kubectl_minor();
    if minor < 26 {
        eprintln!("kubectl 1.{minor} predates plugin completion (1.26); not testing it");
        return;
    }
    let dir = plugin_dir();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, KUBECONFIG).unwrap();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .args(args)
            .env("PATH", path_with(dir.path()))
            .env("KUBECONFIG", &kc)
            .output()
            .expect("kubectl is on PATH (the tests use the real one)");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let contexts = kubectl(&["__complete", "extpath", "scan", "--context", ""]);
    assert!(
        contexts.starts_with("prod-admin\t") && contexts.contains("\nstaging-admin\t"),
        "{contexts}"
    );
    let rules = kubectl(&["__complete", "extpath", "explain", "apf-max"]);
    assert!(rules.starts_with("apf-max-inflight-429\t"), "{rules}");
}
