//! Fleet mode of `scan`, `collect` and `analyze`: several kubeconfig contexts in one run
//! (`--context a,b,c`, `--all-contexts`), and the fleet bundle directory (`collect --output-dir
//! DIR`, `analyze DIR`).
//!
//! Clusters are collected concurrently, at most `--parallel` at once, each bounded by its own
//! `--timeout`; a cluster that cannot be collected becomes its own row with its exit code and never
//! stops the others. Each cluster is collected and classified exactly as `scan --context X` alone
//! would do it ([`super::collect::collect_bundle_with`], [`super::analyze::Prepared`]).
//!
//! What this module does not own: the fleet document and its renderings (`report::fleet`), the
//! collection itself (`collect`), the kubeconfig format (`collect::connect`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use super::collect::{CollectArgs, CollectFlags, collect_bundle_with};
use super::kube_flags::KubeFlags;
use super::{CliError, DocFormat, EXIT_INPUT, EXIT_UNREACHABLE, input_error};
use crate::bundle::{CollectionSource, EvidenceBundle};
use crate::report::fleet::{ClusterDiagnosis, FleetDiagnosis, worst_exit};

/// The flags that select several clusters.
#[derive(Debug, Clone, Args)]
pub struct FleetFlags {
    /// Every context of the kubeconfig, as one fleet (`--context a,b,c` names some of them).
    #[arg(long = "all-contexts", conflicts_with = "context")]
    pub all_contexts: bool,
    /// With several contexts, how many clusters are collected at once. The default, 4, keeps 2
    /// cores busy: a collection spends its time waiting (the metrics --window, the API server's
    /// answers, TLS handshakes to backends) and uses a few percent of a core meanwhile, so four
    /// overlap their waits without queueing for CPU; the benchmark in the README measures it.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel: u16,
}

/// One cluster of a fleet: a kubeconfig context and the server its cluster names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The context.
    pub context: String,
    /// Its cluster's server, as the kubeconfig (or `--server`) says.
    pub server: Option<String>,
}

/// The clusters the flags name, or `None` for the single-cluster commands: `--context x` with
/// one name keeps kubectl's meaning (as does a context whose own name has a comma).
///
/// # Errors
/// Input errors (exit 2): no kubeconfig, an empty one with `--all-contexts`, a context it does not
/// have — before anything is sent, so a typo does not cost a collection.
pub fn targets(kube: &KubeFlags, fleet: &FleetFlags) -> anyhow::Result<Option<Vec<Target>>> {
    let named = match (&kube.context, fleet.all_contexts) {
        (_, true) => None,
        (Some(c), false) if c.contains(',') => Some(c.clone()),
        _ => return Ok(None),
    };
    let contexts = crate::collect::connect::kubeconfig_contexts(&kube.connect_options())
        .map_err(|e| input_error(format!("{e}")))?;
    let Some(named) = named else {
        if contexts.is_empty() {
            return Err(input_error(
                "--all-contexts: the kubeconfig has no contexts",
            ));
        }
        return Ok(Some(
            contexts
                .into_iter()
                .map(|c| Target {
                    context: c.name,
                    server: c.server,
                })
                .collect(),
        ));
    };
    if contexts.iter().any(|c| c.name == named) {
        return Ok(None);
    }
    let mut out: Vec<Target> = Vec::new();
    for name in named.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if out.iter().any(|t| t.context == name) {
            continue;
        }
        let Some(c) = contexts.iter().find(|c| c.name == name) else {
            let known: Vec<&str> = contexts.iter().map(|c| c.name.as_str()).collect();
            return Err(input_error(format!(
                "--context {named}: the kubeconfig has no context {name:?} (it has: {})",
                known.join(", ")
            )));
        };
        out.push(Target {
            context: c.name.clone(),
            server: c.server.clone(),
        });
    }
    if out.is_empty() {
        return Err(input_error(format!(
            "--context {named:?}: no context named"
        )));
    }
    Ok(Some(out))
}

/// The one context of `--context X` (for `collect --output-dir` of a single cluster).
///
/// # Errors
/// Input errors: no `--context`, or a context the kubeconfig does not have.
pub fn single_target(kube: &KubeFlags) -> anyhow::Result<Vec<Target>> {
    let Some(name) = &kube.context else {
        return Err(input_error(
            "--output-dir needs --context (one or several, comma-separated) or --all-contexts",
        ));
    };
    let contexts = crate::collect::connect::kubeconfig_contexts(&kube.connect_options())
        .map_err(|e| input_error(format!("{e}")))?;
    let c = contexts
        .into_iter()
        .find(|c| &c.name == name)
        .ok_or_else(|| input_error(format!("--context: the kubeconfig has no context {name:?}")))?;
    Ok(vec![Target {
        context: c.name,
        server: c.server,
    }])
}

/// What one cluster's collection gave: its bundle, or its exit code and error.
pub type Outcome = Result<EvidenceBundle, (u8, String)>;

/// Flags that make sense for one cluster only, refused with several.
fn check_fleet_flags(collect: &CollectFlags) -> anyhow::Result<()> {
    collect.check()?;
    if !collect.merge.is_empty() {
        return Err(input_error(
            "--merge adds one cluster's evidence to its collection; it cannot be used with several contexts",
        ));
    }
    Ok(())
}

/// Collect every target, at most `parallel` at once, in the targets' order.
async fn collect_all(
    kube: &KubeFlags,
    collect: &CollectFlags,
    targets: &[Target],
    parallel: usize,
) -> Vec<Outcome> {
    use futures::stream::StreamExt;
    let mut done: Vec<(usize, Outcome)> = futures::stream::iter(targets.iter().enumerate())
        .map(|(i, t)| async move { (i, collect_one(kube, collect, t).await) })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, o)| o).collect()
}

/// One cluster, as `collect --context X` would collect it, bounded by its own deadline: the
/// collection keeps to `--timeout` itself; the bound here also covers connecting (an exec
/// credential plugin that hangs).
async fn collect_one(kube: &KubeFlags, collect: &CollectFlags, t: &Target) -> Outcome {
    let mut kube = kube.clone();
    kube.context = Some(t.context.clone());
    let started = Instant::now();
    let limit = collect.timeout + kube.request_timeout.max(Duration::from_secs(1));
    let r = tokio::time::timeout(
        limit,
        collect_bundle_with(&kube, collect, &crate::collect::NoProgress),
    )
    .await;
    let outcome = match r {
        Err(_) => Err((
            EXIT_UNREACHABLE,
            format!(
                "the collection did not finish within --timeout ({} s) and --request-timeout",
                collect.timeout.as_secs()
            ),
        )),
        Ok(Ok(bundle)) => Ok(bundle),
        Ok(Err(e)) => {
            let code = e
                .downcast_ref::<CliError>()
                .map(|e| e.code)
                .unwrap_or(EXIT_INPUT);
            Err((code, format!("{e:#}")))
        }
    };
    if collect.verbosity >= 1 {
        let how = match &outcome {
            Ok(_) => "collected".to_string(),
            Err((code, e)) => format!("not collected (exit {code}): {e}"),
        };
        eprintln!(
            "[{:>7.3}s] cluster {}: {how} in {:.1} s",
            super::started().elapsed().as_secs_f64(),
            t.context,
            started.elapsed().as_secs_f64()
        );
    }
    outcome
}

/// The server a bundle was collected from, else the kubeconfig's.
fn server_of(bundle: &EvidenceBundle, t: &Target) -> Option<String> {
    match &bundle.collection.source {
        CollectionSource::Live { server, .. } => Some(server.clone()),
        _ => t.server.clone(),
    }
}

/// `scan` over several clusters: collect them, classify each, print the fleet report; the exit
/// code is the worst cluster's.
///
/// # Errors
/// Input errors before anything is sent; write errors.
pub fn scan(
    kube: &KubeFlags,
    collect: &CollectFlags,
    fleet: &FleetFlags,
    analyze: &super::analyze::AnalyzeFlags,
    prepared: &super::analyze::Prepared,
    targets: Vec<Target>,
) -> anyhow::Result<u8> {
    check_fleet_flags(collect)?;
    let rt = tokio::runtime::Runtime::new()?;
    let outcomes = rt.block_on(collect_all(
        kube,
        collect,
        &targets,
        usize::from(fleet.parallel),
    ));
    let fail_on = analyze.fail_on.severity();
    let clusters = targets
        .into_iter()
        .zip(outcomes)
        .map(|(t, o)| match o {
            Ok(bundle) => {
                let server = server_of(&bundle, &t);
                // The collection kept to `--timeout` less the analysis reserve; the analysis gets
                // that reserve, so each cluster's work stays within `--timeout` as `scan` of one
                // cluster does. Counted from when its analysis starts, not from the fleet's start:
                // clusters collected early wait for the slowest, and waiting is not their work.
                let deadline = crate::engine::Deadline {
                    at: Instant::now() + collect.analysis_reserve,
                    timeout: collect.timeout,
                };
                let d = prepared.diagnose_until(&bundle, Some(deadline));
                ClusterDiagnosis::diagnosed(t.context, server, d, fail_on)
            }
            Err((code, error)) => ClusterDiagnosis::failed(t.context, t.server, code, error),
        })
        .collect();
    super::analyze::report_fleet(&FleetDiagnosis::new(clusters), analyze)
}

/// The index of a fleet bundle directory (`fleet.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetIndex {
    /// `extpath.dev/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `FleetBundle`.
    pub kind: String,
    /// One entry per context, in the order they were given.
    pub clusters: Vec<IndexEntry>,
}

/// One context of a fleet bundle directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// The kubeconfig context.
    pub context: String,
    /// The API server's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The bundle's file name, relative to the directory; absent when it could not be collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// 0 when collected, else the exit code its collection had (3: not reachable).
    #[serde(default)]
    pub exit_code: u8,
    /// Why it could not be collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The index's file name in a fleet bundle directory.
pub const INDEX_FILE: &str = "fleet.yaml";

/// A file name for a context: kubeconfig context names carry `/` and `:` (EKS ARNs), which a file
/// name cannot; anything but letters, digits, `.`, `-` and `_` becomes `_`, and a clash gets a
/// number.
fn file_name(context: &str, ext: &str, taken: &[String]) -> String {
    let mut stem: String = context
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() || stem.starts_with('.') || stem == "fleet" {
        stem.insert(0, '_');
    }
    let mut name = format!("{stem}.{ext}");
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{stem}-{n}.{ext}");
        n += 1;
    }
    name
}

/// `collect --output-dir DIR`: collect the targets and write one bundle per context and the
/// index. Exit code: 0, or the worst of the contexts that could not be collected.
///
/// # Errors
/// Input errors before anything is sent; a directory that cannot be written (exit 2).
pub fn collect_to_dir(args: &CollectArgs, targets: Vec<Target>, dir: &Path) -> anyhow::Result<u8> {
    check_fleet_flags(&args.collect)?;
    std::fs::create_dir_all(dir).map_err(|e| {
        input_error(format!(
            "{}: cannot create the directory: {e}",
            dir.display()
        ))
    })?;
    let rt = tokio::runtime::Runtime::new()?;
    let outcomes = rt.block_on(collect_all(
        &args.kube,
        &args.collect,
        &targets,
        usize::from(args.fleet.parallel),
    ));
    let ext = match args.output {
        DocFormat::Yaml => "yaml",
        DocFormat::Json => "json",
    };
    let mut taken: Vec<String> = Vec::new();
    let mut entries = Vec::new();
    for (t, o) in targets.into_iter().zip(outcomes) {
        let entry = match o {
            Ok(bundle) => {
                let name = file_name(&t.context, ext, &taken);
                taken.push(name.clone());
                let text = match args.output {
                    DocFormat::Yaml => bundle.to_yaml()?,
                    DocFormat::Json => bundle.to_json()? + "\n",
                };
                write_file(&dir.join(&name), &text)?;
                IndexEntry {
                    server: server_of(&bundle, &t),
                    context: t.context,
                    bundle: Some(name),
                    exit_code: 0,
                    error: None,
                }
            }
            Err((code, error)) => IndexEntry {
                context: t.context,
                server: t.server,
                bundle: None,
                exit_code: code,
                error: Some(error),
            },
        };
        entries.push(entry);
    }
    let code = worst_exit(entries.iter().map(|e| e.exit_code));
    let index = FleetIndex {
        api_version: crate::report::fleet::FLEET_API_VERSION.to_string(),
        kind: "FleetBundle".to_string(),
        clusters: entries,
    };
    let text = serde_saphyr::to_string(&index)?;
    write_file(&dir.join(INDEX_FILE), &text)?;
    for e in &index.clusters {
        match (&e.bundle, &e.error) {
            (Some(b), _) => eprintln!("{}: {}", e.context, dir.join(b).display()),
            (None, err) => eprintln!(
                "{}: not collected (exit {}): {}",
                e.context,
                e.exit_code,
                err.as_deref().unwrap_or("")
            ),
        }
    }
    Ok(code)
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text)
        .map_err(|e| input_error(format!("{}: cannot write: {e}", path.display())))
}

/// Whether `path` is a fleet bundle directory (a directory holding the index).
pub fn is_fleet_dir(path: &Path) -> bool {
    path.is_dir() && path.join(INDEX_FILE).is_file()
}

/// `analyze DIR`: classify each bundle of a fleet bundle directory. Contexts that could not be
/// collected keep their row and exit code.
///
/// # Errors
/// An index or a bundle that does not load: one line naming the file, exit 2.
pub fn analyze_dir(
    dir: &Path,
    analyze: &super::analyze::AnalyzeFlags,
    prepared: &super::analyze::Prepared,
) -> anyhow::Result<u8> {
    let index_path = dir.join(INDEX_FILE);
    let text = std::fs::read_to_string(&index_path)
        .map_err(|e| input_error(format!("{}: cannot read: {e}", index_path.display())))?;
    let index: FleetIndex = serde_saphyr::from_str(&text)
        .map_err(|e| input_error(format!("{}: not a fleet index: {e}", index_path.display())))?;
    if index.kind != "FleetBundle" {
        return Err(input_error(format!(
            "{}: kind {:?}, expected FleetBundle",
            index_path.display(),
            index.kind
        )));
    }
    let fail_on = analyze.fail_on.severity();
    let mut clusters = Vec::new();
    for e in index.clusters {
        let c = match (&e.bundle, e.exit_code) {
            (Some(file), _) => {
                let path: PathBuf = dir.join(file);
                if Path::new(file).components().count() != 1 {
                    return Err(input_error(format!(
                        "{}: context {:?}: bundle {file:?} is not a file name in the directory",
                        index_path.display(),
                        e.context
                    )));
                }
                let bundle = super::import::load_bundle_arg(&path)?;
                ClusterDiagnosis::diagnosed(
                    e.context,
                    e.server,
                    prepared.diagnose(&bundle),
                    fail_on,
                )
            }
            (None, 0) => {
                return Err(input_error(format!(
                    "{}: context {:?} has neither a bundle nor an exit code",
                    index_path.display(),
                    e.context
                )));
            }
            (None, code) => ClusterDiagnosis::failed(
                e.context,
                e.server,
                code,
                e.error.unwrap_or_else(|| "not collected".to_string()),
            ),
        };
        clusters.push(c);
    }
    super::analyze::report_fleet(&FleetDiagnosis::new(clusters), analyze)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_names_become_safe_distinct_file_names() {
        let mut taken = Vec::new();
        let a = file_name("arn:aws:eks:eu-west-1:1:cluster/prod", "yaml", &taken);
        assert_eq!(a, "arn_aws_eks_eu-west-1_1_cluster_prod.yaml");
        taken.push(a);
        let b = file_name("arn:aws:eks:eu-west-1:1:cluster:prod", "yaml", &taken);
        assert_eq!(b, "arn_aws_eks_eu-west-1_1_cluster_prod-2.yaml");
        assert_eq!(file_name("fleet", "yaml", &[]), "_fleet.yaml");
        assert_eq!(file_name("..", "yaml", &[]), "_...yaml");
    }
}
