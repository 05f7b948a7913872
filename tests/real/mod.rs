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
    /// `why`'s request as sent and answered (null for the other commands).
    pub(crate) request: Value,
    /// Which command made it, for messages.
    pub(crate) command: String,
}

impl Scan {
    /// The HTTP status `why`'s request got (`None`: no answer, or not a `why`).
    pub(crate) fn request_status(&self) -> Option<u16> {
        self.request["status"].as_u64().map(|c| c as u16)
    }

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
    let (diagnosis, request_verdict, request) = if doc["kind"] == "WhyReport" {
        (
            doc["diagnosis"].clone(),
            doc["verdict"].clone(),
            doc["request"].clone(),
        )
    } else {
        (doc, Value::Null, Value::Null)
    };
    Scan {
        code: r.code,
        diagnosis,
        stderr: r.stderr,
        request_verdict,
        request,
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

/// `why --dry-run=server -f FILE -o json` against `cp`: a write through admission, sent only as a
/// server-side dry run; `object` is the file's YAML (`args` adds flags: `--as`, …).
pub(crate) fn why_write(cp: &ControlPlane, object: &str, args: &[&str]) -> Scan {
    let files = Files::new();
    let file = files.write("object.yaml", object);
    let (kubeconfig, file) = (
        cp.kubeconfig.display().to_string(),
        file.display().to_string(),
    );
    let mut all = vec![
        "why",
        "--dry-run=server",
        "-f",
        &file,
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ];
    all.extend_from_slice(args);
    outcome("why --dry-run=server -f", &all)
}

/// `why`'s human view (the default output) of a request: `METHOD PATH` and flags in `args`, or,
/// with `object` (a file's YAML), the server-side dry-run write of it. Its exit code and text —
/// what an on-call engineer reads.
pub(crate) fn why_human(cp: &ControlPlane, object: Option<&str>, args: &[&str]) -> (i32, String) {
    let home = Files::new();
    let kubeconfig = cp.kubeconfig.display().to_string();
    let file = object.map(|o| home.write("object.yaml", o).display().to_string());
    let mut all = vec!["why", "--kubeconfig", &kubeconfig, "--color", "never"];
    if let Some(f) = &file {
        all.extend(["--dry-run=server", "-f", f]);
    }
    all.extend_from_slice(args);
    let r = run(home.path(), &all, &[("COLUMNS", "200")]);
    (r.code, format!("{}{}", r.stdout, r.stderr))
}

/// `why`'s human view reads right for a request whose verdict is `class`: the verdict line says
/// so and where it broke, a step of that rung is marked broken (✗), no step of it reads passed
/// (✓) unless another step of the same rung broke (an aggregated path authenticates twice), the
/// class is not among what it ruled out, and the view names each of `names` (the subject to
/// blame).
pub(crate) fn assert_why_reads_right(text: &str, class: &str, names: &[&str]) {
    let verdict = text
        .lines()
        .find_map(|l| l.strip_prefix("Verdict"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("why's view has no verdict line:\n{text}"));
    assert!(
        verdict.starts_with(&format!("{class},")),
        "why's verdict is not {class}: {verdict}\n{text}"
    );
    let rung = verdict
        .split(", broke at ")
        .nth(1)
        .and_then(|r| r.split([' ', ',']).next())
        .unwrap_or_else(|| panic!("why's verdict says no rung: {verdict}\n{text}"));
    let steps = |mark: &str| {
        text.lines()
            .filter(|l| {
                l.trim_start()
                    .strip_prefix(mark)
                    .is_some_and(|rest| rest.split_whitespace().next() == Some(rung))
                    && l.starts_with("  ")
                    && !l.starts_with("    ")
            })
            .count()
    };
    assert!(
        steps("✗") > 0,
        "the verdict broke at {rung}, yet no {rung} step is marked broken:\n{text}"
    );
    let ruled_out: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Ruled out"))
        .take_while(|l| l.starts_with("Ruled out") || l.starts_with("          "))
        .map(|l| l.trim_start_matches("Ruled out").trim_start())
        .collect();
    assert!(
        !ruled_out
            .iter()
            .any(|l| l.starts_with(&format!("{class} "))),
        "why rules out {class}, the class of its own verdict:\n{text}"
    );
    for n in names {
        assert!(text.contains(n), "why's view does not name {n}:\n{text}");
    }
}

/// `analyze --raw` of an on-call's folder read all of it: no file left unrecognised, every
/// client request named by what it asked (not `request in FILE`: a trace line or a `curl -v` the
/// reader could not place), and no client request left unexplained (Inconclusive).
pub(crate) fn assert_raw_read_all(a: &Scan) {
    let unread: Vec<String> = a.diagnosis["gaps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| {
            g["detail"]
                .as_str()
                .is_some_and(|d| d.contains("unrecognised content"))
        })
        .map(|g| g.to_string())
        .collect();
    assert!(
        unread.is_empty(),
        "files analyze --raw did not read: {unread:#?}"
    );
    let unplaced: Vec<String> = a.diagnosis["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["subject"]["kind"] == "Request")
        .filter(|v| {
            v["class"] == "Inconclusive"
                || v["subject"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("request in "))
        })
        .map(|v| format!("{} {}", v["class"], v["subject"]["name"]))
        .collect();
    assert!(
        unplaced.is_empty(),
        "client requests analyze --raw could not place or explain: {unplaced:?}\n{}",
        a.describe()
    );
}

/// `analyze --raw DIR -o json`: the files an on-call engineer saved.
pub(crate) fn analyze_raw(dir: &std::path::Path) -> Scan {
    let d = dir.display().to_string();
    outcome("analyze --raw", &["analyze", "--raw", &d, "-o", "json"])
}

/// What a case checks: one outcome or several (its scan, and `why` and `analyze --raw` of the
/// same broken cluster), each against its expectation.
pub(crate) struct Checks(pub(crate) Vec<(Scan, Expect)>);

impl Checks {
    /// A scan and the on-call's folder through `analyze --raw`, both expecting `expect`, and
    /// `why` of a failing request whose own verdict is `class` at `severity`.
    pub(crate) fn scan_why_raw(
        expect: Expect,
        scan: Scan,
        why: Scan,
        (class, severity): (&'static str, &'static str),
        raw: Scan,
    ) -> Self {
        Checks(vec![
            (scan, expect.clone()),
            (why, Expect::Request { class, severity }),
            (raw, expect),
        ])
    }
}

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
