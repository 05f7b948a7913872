//! The Kubernetes release the reference server speaks, and everything it exposes differently by
//! release.
//!
//! A scenario chooses its release with `server.version` (the `/version` gitVersion, default
//! [`DEFAULT_VERSION`]); [`Profile`] is derived from its major.minor and is the only place that
//! knows which release added, renamed or re-bucketed what. Every difference is one threshold
//! constant below, named after the difference, with the upstream change it comes from; the modules
//! that record metrics (admission, conversion, APF, storage, the request handler) and answer
//! `/readyz`, `/livez`, `/healthz` and `/version` ask the profile instead of testing versions.
//!
//! Supported: 1.24 to 1.30 ([`OLDEST_MINOR`] ..= [`NEWEST_MINOR`]); a scenario asking for another
//! release is refused at load. 1.24 is fitted to the real 1.24 captures in `fixtures/raw/*/`
//! (`kube-apiserver-metrics.txt`, `kas-readyz.txt`, `kas-livez.txt`), 1.30 to the source at
//! v1.30.14 (REFERENCE §3); a release in between takes, for each difference, the side of its
//! threshold. A recorded bundle's version is clamped into the range rather than refused
//! ([`Profile::for_version`]): the replay serves its recorded metrics and health anyway.
//!
//! Not here: the families that are the same in every supported release (each module declares
//! those), recording and rendering (`metrics.rs`), etcd's own `/metrics` (etcd's release, not
//! Kubernetes').

use super::metrics::Desc;

/// `server.version` when the scenario gives none.
pub const DEFAULT_VERSION: &str = "v1.30.14";
/// The oldest minor release (of Kubernetes 1) the server has a profile for.
pub const OLDEST_MINOR: u32 = 24;
/// The newest.
pub const NEWEST_MINOR: u32 = 30;

// ---- Thresholds: the first minor release with the newer behaviour --------------------------------

/// `apiserver_crd_webhook_conversion_duration_seconds` was renamed
/// `apiserver_crd_conversion_webhook_duration_seconds` by kubernetes PR #118542 (1.28); same labels
/// and buckets (`ExponentialBuckets(0.001, 2, 15)` in
/// apiextensions-apiserver `pkg/apiserver/conversion/metrics.go` before and after).
const CRD_CONVERSION_HISTOGRAM_RENAMED: u32 = 28;
/// `apiserver_conversion_webhook_request_total` and `apiserver_conversion_webhook_duration_seconds`
/// were added (alpha) by kubernetes PR #118292 (1.28); before, a failed conversion shows only as
/// `succeeded="false"` in the latency histogram (REFERENCE §3.9).
const CONVERSION_WEBHOOK_FAMILIES_ADDED: u32 = 28;
/// `apiserver_admission_webhook_admission_duration_seconds` gained the 10 s and 25 s buckets in
/// kubernetes PR #115802 (merged 2023-02, 1.27); the 1.24 captures top out at 2.5 s.
const WEBHOOK_LATENCY_BUCKETS_TO_25S: u32 = 27;
/// `apiserver_flowcontrol_nominal_limit_seats` was introduced in 1.26 with concurrency borrowing
/// (the release note of kubernetes PR #118959 says so). The older
/// `apiserver_flowcontrol_request_concurrency_limit` stays exposed through 1.30: PR #118959
/// deprecated it and the source gives `DeprecatedVersion: "1.30.0"`, so it is hidden from 1.31.
const APF_NOMINAL_LIMIT_SEATS_ADDED: u32 = 26;
/// `apiserver_flowcontrol_current_executing_seats` first appears in 1.28 (Google's GKE metric
/// reference lists it from 1.28.3 with no earlier patch releases, while it lists
/// `nominal_limit_seats` back to 1.26.11). The older `apiserver_flowcontrol_request_concurrency_in_use`
/// stays exposed through 1.30 (`DeprecatedVersion: "1.31.0"` in the source).
const APF_EXECUTING_SEATS_ADDED: u32 = 28;
/// `apiserver_flowcontrol_request_wait_duration_seconds` gained its 15 s bucket in kubernetes
/// PR #118945 (merged 2023-06, 1.28); the 1.24 captures go 10 → 30.
const APF_WAIT_15S_BUCKET_ADDED: u32 = 28;
/// `etcd_requests_total` and `etcd_request_errors_total` were added by kubernetes PR #117222
/// (merged 2023-04, 1.28); the 1.24 captures have only `etcd_request_duration_seconds`.
const ETCD_REQUEST_COUNTERS_ADDED: u32 = 28;
/// A LIST of a CRD's non-storage version is served from that version's watch cache, whose objects
/// were converted when it filled (and as they changed), so lists keep answering after the
/// converter stops while a GET — read from etcd and converted on every call — and a write fail.
/// Seen on a real v1.36.2 (`tests/real/fidelity.rs`, `converter_stopped_reads_*`; a v1.24 fails
/// every read). Upstream it comes with ConsistentListFromCache (beta and on by default in 1.31)
/// and lists served from the cache with `limit` (1.33); a real 1.30 still reads a list without
/// `resourceVersion` from etcd. It is set at 1.30 because the newest profile stands for the
/// releases after it too: a recording of a 1.31–1.36 server is served with it.
const CRD_LISTS_FROM_CONVERTED_WATCH_CACHE: u32 = 30;
/// The finer latency buckets of `apiserver_request_duration_seconds` (0.005 and 0.025 below 0.05)
/// and the aligned buckets of `etcd_request_duration_seconds` ("keep consistent with apiserver
/// metric requestLatencies", kubernetes PR #107042). The 1.24 captures (v1.24.0-alpha.1, a
/// snapshot of 2021-12-23) still carry the older layouts of both, and they are the only real 1.24
/// exposition the project holds, so the 1.24 profile keeps them. PR #107042 was opened on
/// 2021-12-15 and merged after that snapshot, possibly within the 1.24 cycle: a GA 1.24.x may
/// already expose the aligned etcd buckets (not verified; the threshold follows the captures).
/// Every later supported release uses the 1.30 layouts.
const ALIGNED_LATENCY_BUCKETS: u32 = 25;

// ---- Families whose name or presence depends on the release --------------------------------------

const CRD_CONVERSION_OLD: Desc = Desc {
    name: "apiserver_crd_webhook_conversion_duration_seconds",
    help: "[ALPHA] CRD webhook conversion duration in seconds",
    labels: &["crd_name", "from_version", "succeeded", "to_version"],
};
const CRD_CONVERSION_NEW: Desc = Desc {
    name: "apiserver_crd_conversion_webhook_duration_seconds",
    help: "[ALPHA] CRD webhook conversion duration in seconds",
    labels: &["crd_name", "from_version", "succeeded", "to_version"],
};
const APF_NOMINAL_LIMIT_SEATS: Desc = Desc {
    name: "apiserver_flowcontrol_nominal_limit_seats",
    help: "[BETA] Nominal number of execution seats configured for each priority level",
    labels: &["priority_level"],
};
const APF_REQUEST_CONCURRENCY_LIMIT: Desc = Desc {
    name: "apiserver_flowcontrol_request_concurrency_limit",
    help: "[ALPHA] Shared concurrency limit in the API Priority and Fairness system",
    labels: &["priority_level"],
};
const APF_CURRENT_EXECUTING_SEATS: Desc = Desc {
    name: "apiserver_flowcontrol_current_executing_seats",
    help: "[BETA] Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
    labels: &["flow_schema", "priority_level"],
};
const APF_REQUEST_CONCURRENCY_IN_USE: Desc = Desc {
    name: "apiserver_flowcontrol_request_concurrency_in_use",
    help: "[ALPHA] Concurrency (number of seats) occupided by the currently executing (all phases count) requests in the API Priority and Fairness system",
    labels: &["flow_schema", "priority_level"],
};
/// `kubernetes_build_info`, the same in every supported release.
const BUILD_INFO: Desc = Desc {
    name: "kubernetes_build_info",
    help: "[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
    labels: &[
        "build_date",
        "compiler",
        "git_commit",
        "git_tree_state",
        "git_version",
        "go_version",
        "major",
        "minor",
        "platform",
    ],
};

// ---- Bucket layouts ---------------------------------------------------------------------------

const REQUEST_DURATION_BUCKETS_1_24: &[f64] = &[
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];
const REQUEST_DURATION_BUCKETS_1_30: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
const ETCD_REQUEST_BUCKETS_1_24: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 15.0, 30.0, 60.0,
];
const ETCD_REQUEST_BUCKETS_1_30: &[f64] = REQUEST_DURATION_BUCKETS_1_30;
const WEBHOOK_BUCKETS_1_24: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5];
const WEBHOOK_BUCKETS_1_30: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];
const APF_WAIT_BUCKETS_1_24: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];
const APF_WAIT_BUCKETS_1_30: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

// ---- Health checks ----------------------------------------------------------------------------

/// `/readyz?verbose` of the real 1.24 captures (`fixtures/raw/*/kas-readyz.txt`), in order.
const CHECKS_1_24: &[&str] = &[
    "ping",
    "log",
    "etcd",
    "informer-sync",
    "poststarthook/start-kube-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/priority-and-fairness-filter",
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    "poststarthook/bootstrap-controller",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/aggregator-reload-proxy-client-cert",
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-status-available-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "shutdown",
];
/// The 1.30 checks the server models (a subset of a real 1.30 `/readyz?verbose`, in its order).
const CHECKS_1_30: &[&str] = &[
    "ping",
    "log",
    "etcd",
    "informer-sync",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-status-available-controller",
];
/// Which list is served. 1.24's is the captures' whole list; for later releases the server serves
/// the 1.30 subset it models (every one of those checks also runs on 1.24, so nothing is invented
/// either way). There is no capture of a release in between, so the captured list stays with 1.24.
const HEALTH_CHECKS_1_30: u32 = 25;
/// Checks that only `/readyz` runs (generic apiserver: `informer-sync` and `shutdown` are readyz
/// checks; `/livez` and `/healthz` run the rest, as `kas-livez.txt` shows).
pub const READYZ_ONLY_CHECKS: &[&str] = &["informer-sync", "shutdown"];

/// The release the server speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    git_version: String,
    minor: u32,
}

/// The major.minor of a gitVersion (`v1.24.17`, `v1.24.0-alpha.1+snap`, `1.30`), or None.
pub fn major_minor(git_version: &str) -> Option<(u32, u32)> {
    let v = git_version.trim().trim_start_matches('v');
    let mut parts = v.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// Why a `server.version` has no profile, or None when it has one.
pub fn unsupported(git_version: &str) -> Option<String> {
    match major_minor(git_version) {
        Some((1, m)) if (OLDEST_MINOR..=NEWEST_MINOR).contains(&m) => None,
        Some((major, minor)) => Some(format!(
            "server.version {git_version:?} is Kubernetes {major}.{minor}: the reference server has profiles for 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}"
        )),
        None => Some(format!(
            "server.version {git_version:?} is not a Kubernetes version (expected vMAJOR.MINOR.PATCH, e.g. v1.24.17)"
        )),
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile::for_version(None)
    }
}

impl Profile {
    /// The profile of a `server.version` (None: [`DEFAULT_VERSION`]). A version outside the
    /// supported range (a recorded bundle's) is clamped into it; one that does not parse gets the
    /// newest profile. Scenarios are checked with [`unsupported`] first, so they never clamp.
    pub fn for_version(git_version: Option<&str>) -> Profile {
        let git_version = git_version.unwrap_or(DEFAULT_VERSION).to_string();
        let minor = match major_minor(&git_version) {
            Some((1, m)) => m.clamp(OLDEST_MINOR, NEWEST_MINOR),
            Some((0, _)) => OLDEST_MINOR,
            _ => NEWEST_MINOR,
        };
        Profile { git_version, minor }
    }

    fn since(&self, first: u32) -> bool {
        self.minor >= first
    }

    /// The minor release whose layout the server follows (24 ..= 30).
    pub fn minor(&self) -> u32 {
        self.minor
    }

    /// The gitVersion, as `/version` and `kubernetes_build_info` give it.
    pub fn git_version(&self) -> &str {
        &self.git_version
    }

    /// `/version`. The fields of `version.Info` in every supported release; `emulationMajor` and
    /// friends came with compatibility versions (KEP-4330) after 1.30.
    pub fn version_info(&self) -> serde_json::Value {
        let (major, minor) = major_minor(&self.git_version).unwrap_or((1, self.minor));
        serde_json::json!({
            "major": major.to_string(),
            "minor": minor.to_string(),
            "gitVersion": self.git_version,
            "gitCommit": GIT_COMMIT,
            "gitTreeState": "clean",
            "buildDate": BUILD_DATE,
            "goVersion": GO_VERSION,
            "compiler": "gc",
            "platform": "linux/amd64",
        })
    }

    /// `kubernetes_build_info` and its label values (the same facts as `/version`).
    pub fn build_info(&self) -> (&'static Desc, [String; 9]) {
        let (major, minor) = major_minor(&self.git_version).unwrap_or((1, self.minor));
        (
            &BUILD_INFO,
            [
                BUILD_DATE.into(),
                "gc".into(),
                GIT_COMMIT.into(),
                "clean".into(),
                self.git_version.clone(),
                GO_VERSION.into(),
                major.to_string(),
                minor.to_string(),
                "linux/amd64".into(),
            ],
        )
    }

    /// The CRD conversion latency histogram (`crd_name, from_version, to_version, succeeded`).
    pub fn crd_conversion_histogram(&self) -> &'static Desc {
        if self.since(CRD_CONVERSION_HISTOGRAM_RENAMED) {
            &CRD_CONVERSION_NEW
        } else {
            &CRD_CONVERSION_OLD
        }
    }

    /// Whether a LIST of a CRD's non-storage version is served from a per-version watch cache
    /// converted when it filled (so it needs no conversion webhook call for objects it holds).
    pub fn lists_from_converted_watch_cache(&self) -> bool {
        self.since(CRD_LISTS_FROM_CONVERTED_WATCH_CACHE)
    }

    /// Whether `apiserver_conversion_webhook_request_total` and `…_duration_seconds` exist.
    pub fn has_conversion_webhook_families(&self) -> bool {
        self.since(CONVERSION_WEBHOOK_FAMILIES_ADDED)
    }

    /// Buckets of `apiserver_admission_webhook_admission_duration_seconds`.
    pub fn webhook_latency_buckets(&self) -> &'static [f64] {
        if self.since(WEBHOOK_LATENCY_BUCKETS_TO_25S) {
            WEBHOOK_BUCKETS_1_30
        } else {
            WEBHOOK_BUCKETS_1_24
        }
    }

    /// The gauges that carry a priority level's nominal seat limit (`priority_level`).
    pub fn apf_limit_gauges(&self) -> &'static [Desc] {
        if self.since(APF_NOMINAL_LIMIT_SEATS_ADDED) {
            &[APF_NOMINAL_LIMIT_SEATS, APF_REQUEST_CONCURRENCY_LIMIT]
        } else {
            &[APF_REQUEST_CONCURRENCY_LIMIT]
        }
    }

    /// The gauges that carry the seats in use (`flow_schema, priority_level`).
    pub fn apf_seats_in_use_gauges(&self) -> &'static [Desc] {
        if self.since(APF_EXECUTING_SEATS_ADDED) {
            &[APF_CURRENT_EXECUTING_SEATS, APF_REQUEST_CONCURRENCY_IN_USE]
        } else {
            &[APF_REQUEST_CONCURRENCY_IN_USE]
        }
    }

    /// Buckets of `apiserver_flowcontrol_request_wait_duration_seconds`.
    pub fn apf_wait_buckets(&self) -> &'static [f64] {
        if self.since(APF_WAIT_15S_BUCKET_ADDED) {
            APF_WAIT_BUCKETS_1_30
        } else {
            APF_WAIT_BUCKETS_1_24
        }
    }

    /// Buckets of `apiserver_request_duration_seconds`.
    pub fn request_duration_buckets(&self) -> &'static [f64] {
        if self.since(ALIGNED_LATENCY_BUCKETS) {
            REQUEST_DURATION_BUCKETS_1_30
        } else {
            REQUEST_DURATION_BUCKETS_1_24
        }
    }

    /// Buckets of `etcd_request_duration_seconds`.
    pub fn etcd_request_buckets(&self) -> &'static [f64] {
        if self.since(ALIGNED_LATENCY_BUCKETS) {
            ETCD_REQUEST_BUCKETS_1_30
        } else {
            ETCD_REQUEST_BUCKETS_1_24
        }
    }

    /// Whether `etcd_requests_total` and `etcd_request_errors_total` exist.
    pub fn has_etcd_request_counters(&self) -> bool {
        self.since(ETCD_REQUEST_COUNTERS_ADDED)
    }

    /// The health checks of `/readyz`, in order; `/livez` and `/healthz` run them without
    /// [`READYZ_ONLY_CHECKS`].
    pub fn health_checks(&self) -> &'static [&'static str] {
        if self.since(HEALTH_CHECKS_1_30) {
            CHECKS_1_30
        } else {
            CHECKS_1_24
        }
    }
}

const GIT_COMMIT: &str = "0000000000000000000000000000000000000000";
const BUILD_DATE: &str = "2026-01-01T00:00:00Z";
const GO_VERSION: &str = "go1.22.12";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor_reads_release_and_prerelease_versions() {
        assert_eq!(major_minor("v1.24.17"), Some((1, 24)));
        assert_eq!(major_minor("v1.24.0-alpha.1+snap20211223"), Some((1, 24)));
        assert_eq!(major_minor("1.30"), Some((1, 30)));
        assert_eq!(major_minor("v1.27+k3s1"), Some((1, 27)));
        assert_eq!(major_minor("latest"), None);
    }

    #[test]
    fn only_1_24_to_1_30_are_supported() {
        assert!(unsupported("v1.24.17").is_none());
        assert!(unsupported("v1.30.14").is_none());
        assert!(unsupported("v1.27.3").is_none());
        assert!(unsupported("v1.23.9").unwrap().contains("1.24 to 1.30"));
        assert!(unsupported("v1.31.0").unwrap().contains("1.24 to 1.30"));
        assert!(
            unsupported("v2")
                .unwrap()
                .contains("not a Kubernetes version")
        );
    }

    #[test]
    fn recorded_versions_clamp_into_the_range() {
        assert_eq!(Profile::for_version(Some("v1.21.3")).minor(), 24);
        assert_eq!(Profile::for_version(Some("v1.33.1")).minor(), 30);
        assert_eq!(Profile::for_version(Some("garbage")).minor(), 30);
        assert_eq!(Profile::for_version(None).git_version(), DEFAULT_VERSION);
    }

    #[test]
    fn each_difference_flips_at_its_threshold() {
        let p = |v: &str| Profile::for_version(Some(v));
        let (v24, v27, v28, v30) = (p("v1.24.17"), p("v1.27.1"), p("v1.28.0"), p("v1.30.14"));
        assert_eq!(
            v24.crd_conversion_histogram().name,
            "apiserver_crd_webhook_conversion_duration_seconds"
        );
        assert_eq!(
            v27.crd_conversion_histogram().name,
            "apiserver_crd_webhook_conversion_duration_seconds"
        );
        assert_eq!(
            v28.crd_conversion_histogram().name,
            "apiserver_crd_conversion_webhook_duration_seconds"
        );
        assert!(!v27.has_conversion_webhook_families() && v28.has_conversion_webhook_families());
        assert_eq!(v24.webhook_latency_buckets().last(), Some(&2.5));
        assert_eq!(v27.webhook_latency_buckets().last(), Some(&25.0));
        assert_eq!(v24.apf_limit_gauges().len(), 1);
        assert_eq!(p("v1.26.0").apf_limit_gauges().len(), 2);
        assert_eq!(v27.apf_seats_in_use_gauges().len(), 1);
        assert_eq!(v28.apf_seats_in_use_gauges().len(), 2);
        assert!(!v24.apf_wait_buckets().contains(&15.0) && v30.apf_wait_buckets().contains(&15.0));
        assert_eq!(v24.request_duration_buckets()[0], 0.05);
        assert_eq!(p("v1.25.0").request_duration_buckets()[0], 0.005);
        assert!(!v27.has_etcd_request_counters() && v28.has_etcd_request_counters());
        assert!(v24.health_checks().contains(&"shutdown"));
        assert!(!v30.health_checks().contains(&"shutdown"));
    }

    #[test]
    fn version_info_and_build_info_agree() {
        let p = Profile::for_version(Some("v1.24.17"));
        let v = p.version_info();
        assert_eq!(v["minor"], "24");
        assert_eq!(v["gitVersion"], "v1.24.17");
        assert!(v.get("emulationMajor").is_none());
        let (desc, labels) = p.build_info();
        assert_eq!(desc.labels.len(), labels.len());
        assert_eq!(labels[4], "v1.24.17");
        assert_eq!(labels[7], "24");
    }
}
