//! What the importer accumulates while it reads files, before [`super::finish`] assembles it.
//!
//! Readers append evidence here instead of writing the bundle directly when the evidence cannot be
//! final yet: probes (curl parts are paired, identical attempts folded and targets mapped only once
//! every file is read), log lines (klog times need the year of other evidence), metrics dumps (only
//! one per target survives), and the caBundles and certificate chains verification needs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rustls_pki_types::CertificateDer;

use crate::bundle::observations::Component;
use crate::bundle::{
    ApfPriorityLevelState, EvidenceBundle, Gap, GapReason, MetricTarget, MetricsSource, ObjectRef,
    Probe,
};

use super::log_patterns::LogPattern;
use super::timeline::Stamp;

/// The file being read.
pub(crate) struct FileCtx {
    /// The path as shown in messages and in the bundle.
    pub shown: String,
    /// Its directory (curl parts pair only within one directory).
    pub dir: PathBuf,
    /// The file name without extension, used only to pair curl parts.
    pub stem: String,
}

/// Which part of a curl capture a probe came from, when the file held only that part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CurlPart {
    /// `-i`/`-D` headers (status line and headers, maybe no body).
    Headers,
    /// A `-w` status line only.
    StatusLine,
    /// A body only.
    Body,
}

/// A probe read from client output, not yet final.
pub(crate) struct PendingProbe {
    pub probe: Probe,
    /// When the request was made (klog time of a trace line, `date:` header).
    pub at: Option<Stamp>,
    /// Set for a lone curl part that may be paired by file stem.
    pub curl_part: Option<(CurlPart, PathBuf, String)>,
    /// Group/version of objects seen in a watch stream (`wardle.example.com/v1alpha1`).
    pub object_group_version: Option<String>,
}

impl PendingProbe {
    pub(crate) fn new(probe: Probe) -> Self {
        PendingProbe {
            probe,
            at: None,
            curl_part: None,
            object_group_version: None,
        }
    }
}

/// One log line that matched a known pattern.
pub(crate) struct LogHit {
    pub pattern: &'static LogPattern,
    /// The component, when the pattern proves it; otherwise the file's component is used.
    pub component: Option<Component>,
    pub severity: Option<String>,
    pub at: Option<Stamp>,
    pub message: String,
    pub fields: BTreeMap<String, String>,
    pub origin: String,
}

/// A Kubernetes object, validated, waiting to be added once every file is read.
pub(crate) struct ObjectRecord {
    /// `(group/kind, namespace, name)`.
    pub key: (String, String, String),
    /// `metadata.resourceVersion` as a number (0 when absent): the later copy wins.
    pub resource_version: u64,
    pub file: String,
    pub value: serde_json::Value,
}

/// A `/metrics` dump, before one per target is chosen.
pub(crate) struct MetricsDump {
    pub source: MetricsSource,
    /// `etcd_server_id` of an etcd dump: two dumps with different ids are different etcds.
    pub etcd_server_id: Option<String>,
    /// `process_start_time_seconds`, and the sum of counters: "later" means larger of both.
    pub lateness: (f64, f64),
    /// For kube-apiserver: the size of its etcd's database as the apiserver reports it.
    pub reported_db_size: Option<f64>,
    /// For etcd: `etcd_mvcc_db_total_size_in_bytes`.
    pub db_size: Option<f64>,
}

impl MetricsDump {
    pub(crate) fn target(&self) -> MetricTarget {
        self.source.target
    }
}

/// The trust an object places in a caBundle, kept as PEM so served leaves can be verified.
pub(crate) struct CaTrust {
    pub owner: ObjectRef,
    /// The name a TLS client verifies (`<svc>.<ns>.svc`, or the URL host).
    pub server_name: Option<String>,
    pub pem: Vec<u8>,
}

/// A certificate file as read: the bundle indexes of its certificates and their DER, in order.
pub(crate) struct CertChainFile {
    pub cert_indexes: Vec<usize>,
    pub ders: Vec<CertificateDer<'static>>,
}

/// APF state read from the debug dumps, merged by priority level.
#[derive(Default)]
pub(crate) struct ApfStates {
    pub levels: Vec<ApfPriorityLevelState>,
}

impl ApfStates {
    pub(crate) fn level(&mut self, name: &str) -> &mut ApfPriorityLevelState {
        if let Some(i) = self.levels.iter().position(|l| l.priority_level == name) {
            return &mut self.levels[i];
        }
        self.levels.push(ApfPriorityLevelState {
            priority_level: name.to_string(),
            exempt: false,
            active_queues: 0,
            idle: false,
            quiescing: false,
            waiting_requests: 0,
            executing_requests: 0,
            queues: None,
            pending_in_queues: None,
        });
        self.levels.last_mut().expect("just pushed")
    }
}

/// Everything read so far.
pub(crate) struct Importer {
    pub bundle: EvidenceBundle,
    pub objects: Vec<ObjectRecord>,
    pub probes: Vec<PendingProbe>,
    pub log_hits: Vec<LogHit>,
    /// Timed hops read from logs, their targets not yet mapped.
    pub hops: Vec<super::timed_hops::PendingHop>,
    pub stamps: Vec<Stamp>,
    pub metrics: Vec<MetricsDump>,
    pub ca_trusts: Vec<CaTrust>,
    pub cert_files: Vec<CertChainFile>,
    pub apf: ApfStates,
    /// The file being read may not sink the import: a problem in it, or in an item of it, is an
    /// `unreadable` gap and reading goes on (a file inside a directory, without `--strict`).
    pub lenient: bool,
}

impl Importer {
    pub(crate) fn new(bundle: EvidenceBundle) -> Self {
        Importer {
            bundle,
            objects: Vec::new(),
            probes: Vec::new(),
            log_hits: Vec::new(),
            hops: Vec::new(),
            stamps: Vec::new(),
            metrics: Vec::new(),
            ca_trusts: Vec::new(),
            cert_files: Vec::new(),
            apf: ApfStates::default(),
            lenient: false,
        }
    }

    /// Record a time the evidence carries (it may become the collection time).
    pub(crate) fn stamp(&mut self, s: Option<Stamp>) {
        if let Some(s) = s {
            self.stamps.push(s);
        }
    }

    /// Record a probe and its time.
    pub(crate) fn probe(&mut self, p: PendingProbe) {
        self.stamp(p.at);
        self.probes.push(p);
    }

    /// Record a file (or part of one) that could not be read: the gap's detail is the error
    /// line `--strict` would print.
    pub(crate) fn unreadable(&mut self, e: &super::RawImportError) {
        let path = match e {
            super::RawImportError::Io { path, .. }
            | super::RawImportError::Empty { path }
            | super::RawImportError::NotText { path, .. }
            | super::RawImportError::TooLarge { path, .. }
            | super::RawImportError::UnknownKind { path, .. }
            | super::RawImportError::Malformed { path, .. }
            | super::RawImportError::NothingUsable { path, .. } => path.as_str(),
            super::RawImportError::NoPaths => "",
        };
        self.bundle.gaps.push(Gap::new(
            format!("file:{path}"),
            GapReason::Unreadable,
            e.to_string(),
        ));
    }

    /// A problem with a part of the file being read (an item of a List, a value of an object):
    /// an `unreadable` gap when the file may not sink the import, else the file's error.
    pub(crate) fn tolerate(&mut self, file: &FileCtx, e: FileError) -> Result<(), FileError> {
        if !self.lenient {
            return Err(e);
        }
        self.unreadable(&super::RawImportError::Malformed {
            path: file.shown.clone(),
            line: e.line,
            message: e.message.split_whitespace().collect::<Vec<_>>().join(" "),
        });
        Ok(())
    }

    /// Record a skipped file.
    pub(crate) fn skipped(&mut self, file: &str, detail: impl Into<String>) {
        self.bundle
            .gaps
            .push(Gap::new(format!("file:{file}"), GapReason::Skipped, detail));
    }
}

/// Why a file of a known kind could not be read.
#[derive(Debug)]
pub(crate) struct FileError {
    pub line: Option<usize>,
    pub message: String,
}

impl FileError {
    pub(crate) fn at(line: usize, message: impl Into<String>) -> Self {
        FileError {
            line: Some(line),
            message: message.into(),
        }
    }
    pub(crate) fn whole(message: impl Into<String>) -> Self {
        FileError {
            line: None,
            message: message.into(),
        }
    }
}

/// What reading a file of a known kind gave.
pub(crate) enum Yield {
    /// Evidence was taken.
    Used,
    /// A known kind that carried nothing to keep; the detail becomes a `skipped` gap.
    Nothing(String),
    /// A known kind whose facts are kept from another file (openssl's text about a certificate
    /// that is read from its PEM): consumed silently.
    Consumed,
}

/// Truncate text kept in the bundle (bodies, messages) to `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
