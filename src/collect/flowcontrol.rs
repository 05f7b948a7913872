//! FlowSchemas and PriorityLevelConfigurations, in whatever flowcontrol version the server serves.
//!
//! k8s-openapi carries only flowcontrol v1, while 1.24–1.28 clusters serve v1beta2/v1beta3. So the
//! group's discovery document says which versions exist, the newest is read as JSON, and the shared
//! dynamic mapping (`from_k8s::add_flow_schema` / `add_priority_level`) reads every version alike.

use serde_json::Value;

use super::sources::{Evidence, EvidenceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::{EvidenceBundle, from_k8s};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// Newest first: the first one the server serves is read.
// Served by: v1 from 1.29, v1beta3 1.26–1.31, v1beta2 1.23–1.28, v1beta1 1.20–1.25 (the
// deprecated API migration guide), so every release since 1.20 serves one of them.
const KNOWN_VERSIONS: [&str; 4] = ["v1", "v1beta3", "v1beta2", "v1beta1"];

/// The version to read, from the group discovery document.
pub fn pick_version(group_doc: &Value) -> Option<String> {
    let served: Vec<&str> = group_doc
        .get("versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.get("version")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    KNOWN_VERSIONS
        .iter()
        .find(|v| served.contains(v))
        .map(|v| v.to_string())
}

/// Both lists, in the newest served version.
pub fn fetch(f: &Fetcher) -> EvidenceFuture<'_> {
    Box::pin(async move {
        let doc = f.get_json(&format!("/apis/{GROUP}")).await?;
        let version = pick_version(&doc).ok_or_else(|| FetchError::Status {
            code: 404,
            message: format!("{GROUP} serves none of {KNOWN_VERSIONS:?}"),
        })?;
        let fs_path = format!("/apis/{GROUP}/{version}/flowschemas");
        let pl_path = format!("/apis/{GROUP}/{version}/prioritylevelconfigurations");
        let fs = f.list_all(&fs_path);
        let pl = f.list_all(&pl_path);
        let (fs, pl) = tokio::join!(fs, pl);
        let (fs, pl) = (fs?, pl?);
        let apply: Evidence = Box::new(move |b: &mut EvidenceBundle| {
            for v in &fs {
                from_k8s::add_flow_schema(b, v);
            }
            for v in &pl {
                from_k8s::add_priority_level(b, v);
            }
        });
        Ok(apply)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_served_version_is_read() {
        let doc = serde_json::json!({"versions": [{"groupVersion": "flowcontrol.apiserver.k8s.io/v1beta2", "version": "v1beta2"},
                                                  {"groupVersion": "flowcontrol.apiserver.k8s.io/v1beta1", "version": "v1beta1"}]});
        assert_eq!(pick_version(&doc).as_deref(), Some("v1beta2"));
        assert_eq!(pick_version(&serde_json::json!({"versions": []})), None);
    }
}
