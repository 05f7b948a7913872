//! The recording a replaying server answers from, as its request handlers see it: a leaf the
//! replay's answering modules share, so that none of them depends on the module that starts a
//! replay.

use std::sync::atomic::AtomicUsize;

use axum::body::Body;
use http::Response;

use crate::bundle::carried::{Split, split};
use crate::bundle::{CollectionSource, EvidenceBundle};
use crate::refserver::status::ApiError;

/// A recording being replayed, as the request handlers see it.
#[derive(Debug)]
pub struct Recorded {
    /// The recording.
    pub bundle: EvidenceBundle,
    /// What of it is served.
    pub split: Split,
    /// `/metrics` requests answered so far (the first gets a window's start).
    pub apiserver_scrapes: AtomicUsize,
    /// etcd `/metrics` requests answered so far.
    pub etcd_scrapes: AtomicUsize,
    /// A loopback port where every backend of the recording "listens": it closes each connection
    /// at once (a recording has no backend to shake hands with, and a collection must not dial the
    /// recorded addresses instead).
    pub no_backend_port: u16,
}

impl Recorded {
    /// A recording about to be served, every backend of it "listening" on `no_backend_port`.
    pub fn new(bundle: EvidenceBundle, no_backend_port: u16) -> Self {
        Recorded {
            split: split(&bundle),
            bundle,
            apiserver_scrapes: AtomicUsize::new(0),
            etcd_scrapes: AtomicUsize::new(0),
            no_backend_port,
        }
    }

    /// Whether the recording was collected from a live API server (which saw everything it
    /// looked for, so an empty list is "none") rather than imported or written by hand.
    pub fn live(&self) -> bool {
        matches!(self.bundle.collection.source, CollectionSource::Live { .. })
    }
}

/// 403 for what the recording does not hold.
pub fn not_recorded(what: &str, group: &str, resource: &str) -> Response<Body> {
    ApiError::forbidden(
        format!("not in the recording being replayed (it was not collected): {what}"),
        "",
        group,
        resource,
    )
    .into_response()
}
