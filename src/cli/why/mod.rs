//! `why METHOD PATH` and `why --dry-run -f OBJECT.yaml`: reproduce one request, gather its path's
//! evidence, classify it, and show where it broke.
//!
//! Arguments are checked before anything is sent (a bad method, path or object file is exit code
//! 2). The request goes out with the user's credentials — `--as`/`--as-group` impersonation
//! included — and the path's evidence is gathered without impersonation ([`crate::collect::why`]).
//! The bundled rules (or `--rules DIR`) classify the focused bundle; the request's own verdict is
//! the answer, and the other verdicts of the path are shown beside it.
//!
//! The pipeline is scan's: `collect::why` gathers the bundle and the observed trace
//! (`bundle::trace`), the engine classifies it and places the verdicts on the path's rungs
//! (`engine::why`), `report::why` draws it. This file keeps only the flags, the dispatch and the
//! exit codes.
//!
//! Exit codes (DESIGN §4): 0 when no verdict of this path is at or above `--fail-on` (default
//! critical; an Inconclusive verdict counts as a warning), 1 when one is, 2 on bad input, 3 when the
//! API server cannot be reached at all.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::analyze::{AnalyzeFlags, FailOn, RuleArgs};
use super::collect::parse_backend_address;
use super::kube_flags::{KubeFlags, parse_duration};
use super::{EXIT_FINDINGS, EXIT_OK, input_error, unreachable_error};
use crate::collect::why::{
    PlanError, Reproduction, Target, UserInfo, WhyError, WhyOptions, investigate, open_window,
    plan_write, read_object,
};
use crate::collect::{Fetcher, connect};
use crate::engine::Severity;
use crate::engine::gate;
use crate::engine::why::explain;
use crate::report::why::{ViewOptions, WhyFormat, write};
use crate::report::{ColorChoice, Format, RenderOptions};

/// Arguments of `why`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    kubectl extpath why GET /apis/metrics.k8s.io/v1beta1/nodes\n  \
    kubectl extpath why LIST /api/v1/namespaces/team-a/configmaps --as alice\n  \
    kubectl extpath why WATCH /apis/stable.example.com/v1/crontabs --watch-for 10s\n  \
    kubectl extpath why --dry-run=server -f configmap.yaml")]
pub struct WhyArgs {
    /// GET, LIST or WATCH (a write is sent only as --dry-run -f FILE).
    #[arg(value_name = "METHOD", required_unless_present = "file")]
    pub method: Option<String>,
    /// The API path, e.g. /apis/metrics.k8s.io/v1beta1/nodes (a query is kept as given).
    #[arg(value_name = "PATH", required_unless_present = "file")]
    pub path: Option<String>,
    /// Send the object in this file (YAML or JSON) as a server-side dry-run create, or update when
    /// it exists. Needs --dry-run.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        requires = "dry_run",
        conflicts_with_all = ["method", "path"]
    )]
    pub file: Option<PathBuf>,
    /// Server-side dry run: the API server authenticates, authorizes, admits and validates the
    /// write and stores nothing. The only way why sends a write.
    #[arg(
        long = "dry-run",
        value_name = "server",
        num_args = 0..=1,
        default_missing_value = "server",
        value_parser = ["server"],
        requires = "file"
    )]
    pub dry_run: Option<String>,
    #[command(flatten)]
    pub kube: KubeFlags,
    /// Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT` (repeatable).
    #[arg(long = "backend-address", value_name = "SVC.NS=HOST:PORT", value_parser = parse_backend_address)]
    pub backend_address: Vec<(String, String)>,
    /// How long a WATCH is read before it is judged.
    #[arg(long = "watch-for", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub watch_for: Duration,
    /// Bound on gathering the path's evidence after the request; what has not answered becomes a gap.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Output: human (default), json or yaml (the WhyReport document).
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: WhyFormat,
    /// Colour in the human view: auto (a terminal, NO_COLOR unset), always or never.
    #[arg(long = "color", value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// Exit 1 when the request's verdict is at or above this severity (Inconclusive counts as
    /// warning), or when the request failed and nothing explains it.
    #[arg(long = "fail-on", value_enum, default_value = "critical")]
    pub fail_on: FailOn,
    /// Set a rule setting, e.g. `etcd_request_p99_warn_seconds=1` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub rule_args: RuleArgs,
}

impl WhyArgs {
    fn analyze_flags(&self) -> AnalyzeFlags {
        AnalyzeFlags {
            output: Format::Table,
            color: self.color,
            wide: false,
            show_healthy: false,
            classes: Vec::new(),
            subjects: Vec::new(),
            rules: Vec::new(),
            skip_rules: Vec::new(),
            set: self.set.clone(),
            waivers: None,
            fail_on: self.fail_on,
            rule_args: self.rule_args.clone(),
        }
    }

    fn as_user(&self) -> Option<UserInfo> {
        let name = self.kube.as_user.clone()?;
        let mut groups = self.kube.as_group.clone();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Some(UserInfo {
            name,
            groups,
            source: "--as".into(),
        })
    }
}

pub fn run(args: WhyArgs) -> anyhow::Result<u8> {
    let prepared = args.analyze_flags().prepare()?;
    // The method and path (or the object file) are checked before anything is sent.
    let target = match (&args.file, &args.method, &args.path) {
        (Some(_), _, _) => None,
        (None, Some(m), Some(p)) => {
            Some(Target::parse(m, p).map_err(|e| input_error(e.to_string()))?)
        }
        _ => return Err(input_error("why needs METHOD PATH, or --dry-run -f FILE")),
    };
    let object = match &args.file {
        Some(f) => Some(read_object(f).map_err(|e| input_error(e.to_string()))?),
        None => None,
    };
    let rt = tokio::runtime::Runtime::new()?;
    let (inv, d) = rt.block_on(async {
        let user_opts = args.kube.connect_options();
        let user = connect(&user_opts).await?;
        let gatherer =
            if user_opts.impersonate.is_some() || !user_opts.impersonate_groups.is_empty() {
                let mut plain = user_opts.clone();
                plain.impersonate = None;
                plain.impersonate_groups.clear();
                plain.impersonate_uid = None;
                connect(&plain).await?
            } else {
                user.clone()
            };
        let request_timeout = if args.kube.request_timeout.is_zero() {
            Duration::from_secs(10)
        } else {
            args.kube.request_timeout
        };
        // Whether the server answers at all comes first: planning a write reads from it, and a
        // server that answers /version but hangs on storage is diagnosed, not "unreachable".
        let window = open_window(&gatherer, request_timeout)
            .await
            .map_err(|e| unreachable_error(e.to_string()))?;
        let repro = match (target, &object) {
            (Some(target), _) => Reproduction {
                target,
                body: None,
                object_labels: BTreeMap::new(),
                gaps: Vec::new(),
            },
            (None, Some(obj)) => {
                let f = Fetcher::new(gatherer.client.clone(), request_timeout);
                let planned = plan_write(&f, obj, &gatherer.namespace)
                    .await
                    .map_err(|PlanError::Input(m)| input_error(m))?;
                Reproduction {
                    target: planned.target,
                    body: Some(planned.body),
                    object_labels: obj.labels.clone(),
                    gaps: planned.gaps,
                }
            }
            (None, None) => return Err(input_error("why needs METHOD PATH, or --dry-run -f FILE")),
        };
        let opts = WhyOptions {
            request_timeout,
            timeout: args.timeout,
            watch_for: args.watch_for,
            backend_addresses: args.backend_address.iter().cloned().collect(),
            as_user: args.as_user(),
        };
        let inv = investigate(&user, &gatherer, &repro, window, &opts)
            .await
            .map_err(|e| match e {
                WhyError::Unreachable(m) => unreachable_error(m),
                WhyError::Refused(m) => input_error(m),
            })?;
        let d = prepared.diagnose(&inv.bundle);
        Ok::<_, anyhow::Error>((inv, d))
    })?;

    let explained = explain(&inv, &d);
    let verdict = explained.verdict;
    let ro = RenderOptions::for_stdout(args.color, false);
    let view = ViewOptions {
        color: ro.color,
        width: ro.effective_width(),
    };
    let mut out = crate::cli::report_out();
    write(&mut out, args.output, &inv, &explained, &d, view)?;
    out.flush()?;
    let threshold = match args.fail_on {
        FailOn::Warning => Severity::Warning,
        FailOn::Critical => Severity::Critical,
    };
    // The request's own verdict decides: a request that works exits 0 even when something else
    // on its path is broken (shown as other findings), and one that fails with nothing to explain
    // it is not a pass.
    let failed = inv.probe().status.is_none_or(|s| s >= 400);
    let gate = match verdict {
        Some(v) => gate::fails(v, threshold),
        None => failed,
    };
    Ok(if gate { EXIT_FINDINGS } else { EXIT_OK })
}
