//! The real fault suite: real kube-apiservers of two generations (1.24 and 1.36, from
//! `../shared/k8s`, located through `EXTPATH_K8S_ASSETS`; see `util::k8s`) broken the way
//! production breaks them, and `scan`'s verdict on each: its class, subject and severity, and that
//! no other subject is blamed at warning or above. Every case runs on both generations.
//!
//! One file per class of owner. A case that the tool still gets wrong is listed in
//! [`KNOWN_MISSES`] with its generation: the test then asserts that it is still missed, so a fix
//! makes it fail until the entry is removed — the list only shrinks.

mod admission;
mod aggregation;
mod apf;
mod auth;
mod baseline;
mod fidelity;
mod out_of_scope;
mod storage;
mod summaries;
mod watch;

use std::time::Duration;

use serde_json::Value;

use crate::util::k8s::{Assets, ControlPlane, Generation};
use crate::util::{Files, run};

/// (case, generation) pairs the tool still gets wrong.
pub(crate) const KNOWN_MISSES: &[(&str, Generation)] = &[];

/// Runs `case` on `generation` when its binaries are there.
macro_rules! on_both {
    ($case:ident) => {
        mod $case {
            use crate::util::k8s::Generation;
            #[test]
            fn v1_24() {
                super::super::run_case(stringify!($case), Generation::V1_24, super::$case);
            }
            #[test]
            fn v1_36() {
                super::super::run_case(stringify!($case), Generation::V1_36, super::$case);
            }
        }
    };
}
pub(crate) use on_both;

/// Runs `case` on 1.36 only: for a behaviour the 1.24 snapshot does not have (said at the case).
macro_rules! on_1_36 {
    ($case:ident) => {
        mod $case {
            use crate::util::k8s::Generation;
            #[test]
            fn v1_36() {
                super::super::run_case(stringify!($case), Generation::V1_36, super::$case);
            }
        }
    };
}
pub(crate) use on_1_36;

/// What a case expects of `scan` (or of `analyze --raw`, or of `why`).
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// `why`: the traced request's own verdict has this class and severity.
    Request {
        class: &'static str,
        severity: &'static str,
    },
    /// Every subject Healthy, exit 0.
    Healthy,
    /// Exactly one problem at warning or above: rooted at `kind/name` with this class and
    /// severity.
    Problem {
        class: &'static str,
        kind: &'static str,
        name: String,
        severity: &'static str,
    },
    /// No problem at warning or above, and `kind/name` could not be judged (Inconclusive) with a
    /// next step that contains `next`: the re-run that would decide it.
    Undecided {
        kind: &'static str,
        name: String,
        next: &'static str,
    },
}

/// One `scan` of a real control plane — or one `analyze --raw` of the files saved from it, or
/// one `why` of a request to it: the same diagnosis document (for `why`, its `diagnosis` field,
/// and the request's own verdict beside it).
pub(crate) struct Scan {
    pub(crate) code: i32,
    pub(crate) diagnosis: Value,
    pub(crate) stderr: String,
    /// `why`'s verdict on the request (null for the other commands).
    pub(crate) request_verdict: Value,
    /// Which command made it, for messages.
    pub(crate) command: String,
}

impl Scan {
    /// Problems as `class severity kind/name`, for messages.
    pub(crate) fn problems(&self) -> Vec<String> {
        self.diagnosis["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{} {} {}/{}",
                    p["class"].as_str().unwrap_or("?"),
                    p["severity"].as_str().unwrap_or("?"),
                    p["root"]["kind"].as_str().unwrap_or("?"),
                    p["root"]["name"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// Every verdict that is not Healthy, with its rules, summary and evidence (for messages).
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for v in self.diagnosis["verdicts"].as_array().into_iter().flatten() {
            if v["class"] == "Healthy" {
                continue;
            }
            out.push_str(&format!(
                "- {} {} {}/{}: {}\n",
                v["class"].as_str().unwrap_or("?"),
                v["severity"].as_str().unwrap_or("?"),
                v["subject"]["kind"].as_str().unwrap_or("?"),
                v["subject"]["name"].as_str().unwrap_or("?"),
                v["summary"].as_str().unwrap_or("?"),
            ));
            for r in v["rules"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "    {}: {}\n",
                    r["id"].as_str().unwrap_or("?"),
                    r["evidence"]
                ));
            }
        }
        for g in self.diagnosis["gaps"].as_array().into_iter().flatten() {
            out.push_str(&format!("  gap {}\n", g));
        }
        out
    }

    /// Whether it meets `expect`; otherwise why not.
    pub(crate) fn meets(&self, expect: &Expect) -> Result<(), String> {
        let problems = self.problems();
        match expect {
            Expect::Request { class, severity } => {
                let v = &self.request_verdict;
                if v["class"] == *class && v["severity"] == *severity {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: want the request's verdict {class} {severity}, got {} {} ({}; rules {})",
                        self.command,
                        v["class"],
                        v["severity"],
                        v["summary"].as_str().unwrap_or("no verdict"),
                        v["rules"]
                            .as_array()
                            .map(|r| r
                                .iter()
                                .map(|r| r["id"].to_string())
                                .collect::<Vec<_>>()
                                .join(", "))
                            .unwrap_or_default()
                    ))
                }
            }
            Expect::Healthy => {
                let unhealthy: Vec<String> = self.diagnosis["verdicts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| v["class"] != "Healthy")
                    .map(|v| {
                        format!(
                            "{} {} {}/{}",
                            v["class"], v["severity"], v["subject"]["kind"], v["subject"]["name"]
                        )
                    })
                    .collect();
                if self.code == 0 && unhealthy.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: exit {}; not healthy: {unhealthy:?}",
                        self.command, self.code
                    ))
                }
            }
            Expect::Undecided { kind, name, next } => {
                let undecided = self.diagnosis["verdicts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|v| {
                        v["subject"]["kind"] == *kind
                            && v["subject"]["name"] == name.as_str()
                            && v["class"] == "Inconclusive"
                    });
                let names_rerun = undecided.is_some_and(|v| {
                    v["next"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|n| n.as_str().is_some_and(|n| n.contains(next)))
                });
                if problems.is_empty() && names_rerun {
                    Ok(())
                } else {
                    Err(format!(
                        "want {kind}/{name} undecided, naming a re-run with {next:?}, and no problem; got problems {problems:?}, verdict {undecided:?}"
                    ))
                }
            }
            Expect::Problem {
                class,
                kind,
                name,
                severity,
            } => {
                let want = format!("{class} {severity} {kind}/{name}");
                if problems == [want.clone()] {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: want exactly [{want}], got {problems:?}",
                        self.command
                    ))
                }
            }
        }
    }
}

/// `scan -o json` of `cp` with `args` added (`--window 3s` unless `args` sets one), reading
/// etcd's own health and metrics as an operator with etcd access does.
pub(crate) fn scan(cp: &ControlPlane, args: &[&str]) -> Scan {
    scan_with(cp, args, true)
}

/// [`scan`] as an operator without access to etcd (a managed control plane): kube-apiserver's
/// evidence only.
pub(crate) fn scan_without_etcd(cp: &ControlPlane, args: &[&str]) -> Scan {
    scan_with(cp, args, false)
}

fn scan_with(cp: &ControlPlane, args: &[&str], with_etcd: bool) -> Scan {
    let kubeconfig = cp.kubeconfig.display().to_string();
    let etcd = cp.etcd.url();
    let mut all = vec!["scan", "--kubeconfig", &kubeconfig, "-o", "json"];
    if with_etcd {
        all.extend(["--etcd-metrics-url", &etcd]);
    }
    if !args.iter().any(|a| a.starts_with("--window")) {
        all.extend(["--window", "3s"]);
    }
    all.extend_from_slice(args);
    outcome("scan", &all)
}

/// Run the binary with `args` (ending in `-o json`) and read its diagnosis.
fn outcome(command: &str, args: &[&str]) -> Scan {
    let home = Files::new();
    let r = run(home.path(), args, &[]);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "{command} printed no JSON ({e}), exit {}:\nstdout: {}\nstderr: {}",
            r.code, r.stdout, r.stderr
        )
    });
    let (diagnosis, request_verdict) = if doc["kind"] == "WhyReport" {
        (doc["diagnosis"].clone(), doc["verdict"].clone())
    } else {
        (doc, Value::Null)
    };
    Scan {
        code: r.code,
        diagnosis,
        stderr: r.stderr,
        request_verdict,
        command: command.to_string(),
    }
}

/// `why METHOD PATH -o json` against `cp` (`args` adds flags: `--as`, `--watch-for`, …).
pub(crate) fn why(cp: &ControlPlane, method: &str, path: &str, args: &[&str]) -> Scan {
    let kubeconfig = cp.kubeconfig.display().to_string();
    let mut all = vec![
        "why",
        method,
        path,
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ];
    all.extend_from_slice(args);
    outcome(&format!("why {method} {path}"), &all)
}

/// `analyze --raw DIR -o json`: the files an on-call engineer saved.
pub(crate) fn analyze_raw(dir: &std::path::Path) -> Scan {
    let d = dir.display().to_string();
    outcome("analyze --raw", &["analyze", "--raw", &d, "-o", "json"])
}

/// What a case checks: one outcome or several (its scan, and `why` and `analyze --raw` of the
/// same broken cluster), each against its expectation.
pub(crate) struct Checks(pub(crate) Vec<(Scan, Expect)>);

impl From<(Scan, Expect)> for Checks {
    fn from(c: (Scan, Expect)) -> Self {
        Checks(vec![c])
    }
}

impl From<Vec<(Scan, Expect)>> for Checks {
    fn from(c: Vec<(Scan, Expect)>) -> Self {
        Checks(c)
    }
}

/// Run one case on one generation and judge it against [`KNOWN_MISSES`]: a case is right when
/// every one of its checks is.
pub(crate) fn run_case<C: Into<Checks>>(
    name: &str,
    generation: Generation,
    case: fn(&Assets) -> C,
) {
    let Some(assets) = crate::util::k8s::assets(generation) else {
        return;
    };
    let checks = case(&assets).into().0;
    assert!(!checks.is_empty(), "{name} checks nothing");
    let wrong: Vec<String> = checks
        .iter()
        .filter_map(|(scan, expect)| {
            scan.meets(expect).err().map(|why| {
                format!(
                    "{why}\nverdicts:\n{}\nstderr:\n{}",
                    scan.describe(),
                    scan.stderr
                )
            })
        })
        .collect();
    let known = KNOWN_MISSES.contains(&(name, generation));
    match (wrong.is_empty(), known) {
        (true, false) | (false, true) => {}
        (true, true) => {
            panic!("{name} on {generation:?} is right now: remove it from KNOWN_MISSES")
        }
        (false, false) => panic!("{name} on {generation:?}:\n{}", wrong.join("\n---\n")),
    }
}

/// A bound for faults to show (a condition to flip, a process to die).
pub(crate) const SETTLE: Duration = Duration::from_secs(60);
