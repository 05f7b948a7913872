//! The real fault suite: real kube-apiservers of two generations (1.24 and 1.36, from
//! `../shared/k8s`, located through `EXTPATH_K8S_ASSETS`; see `util::k8s`) broken the way
//! production breaks them, and `scan`'s verdict on each: its class, subject and severity, and that
//! no other subject is blamed at warning or above. Every case runs on both generations.
//!
//! One file per class of owner. A case that the tool still gets wrong is listed in
//! [`KNOWN_MISSES`] with its generation: the test then asserts that it is still missed, so a fix
//! makes it fail until the entry is removed — the list only shrinks.

mod aggregation;
mod auth;
mod baseline;
mod out_of_scope;

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

/// What a case expects of `scan`.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
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
}

/// One `scan` of a real control plane.
pub(crate) struct Scan {
    pub(crate) code: i32,
    pub(crate) diagnosis: Value,
    pub(crate) stderr: String,
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
                    Err(format!("exit {}; not healthy: {unhealthy:?}", self.code))
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
                    Err(format!("want exactly [{want}], got {problems:?}"))
                }
            }
        }
    }
}

/// `scan -o json` of `cp` with `args` added (`--window 3s` unless `args` sets one), reading
/// etcd's own health and metrics as an operator with etcd access does.
pub(crate) fn scan(cp: &ControlPlane, args: &[&str]) -> Scan {
    let home = Files::new();
    let kubeconfig = cp.kubeconfig.display().to_string();
    let etcd = cp.etcd.url();
    let mut all = vec![
        "scan",
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
        "--etcd-metrics-url",
        &etcd,
    ];
    if !args.iter().any(|a| a.starts_with("--window")) {
        all.extend(["--window", "3s"]);
    }
    all.extend_from_slice(args);
    let r = run(home.path(), &all, &[]);
    let diagnosis = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "scan printed no diagnosis ({e}), exit {}:\n{}",
            r.code, r.stderr
        )
    });
    Scan {
        code: r.code,
        diagnosis,
        stderr: r.stderr,
    }
}

/// `analyze --raw DIR -o json`: the files an on-call engineer saved.
pub(crate) fn analyze_raw(dir: &std::path::Path) -> Scan {
    let home = Files::new();
    let d = dir.display().to_string();
    let r = run(home.path(), &["analyze", "--raw", &d, "-o", "json"], &[]);
    let diagnosis = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "analyze --raw printed no diagnosis ({e}), exit {}:\n{}",
            r.code, r.stderr
        )
    });
    Scan {
        code: r.code,
        diagnosis,
        stderr: r.stderr,
    }
}

/// Run one case on one generation and judge it against [`KNOWN_MISSES`].
pub(crate) fn run_case(name: &str, generation: Generation, case: fn(&Assets) -> (Scan, Expect)) {
    let Some(assets) = crate::util::k8s::assets(generation) else {
        return;
    };
    let (scan, expect) = case(&assets);
    let known = KNOWN_MISSES.contains(&(name, generation));
    match (scan.meets(&expect), known) {
        (Ok(()), false) | (Err(_), true) => {}
        (Ok(()), true) => {
            panic!("{name} on {generation:?} is right now: remove it from KNOWN_MISSES")
        }
        (Err(why), false) => panic!(
            "{name} on {generation:?}: {why}\nverdicts:\n{}\nstderr:\n{}",
            scan.describe(),
            scan.stderr
        ),
    }
}

/// A bound for faults to show (a condition to flip, a process to die).
pub(crate) const SETTLE: Duration = Duration::from_secs(60);
