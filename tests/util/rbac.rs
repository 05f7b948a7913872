//! The least-privilege ClusterRole the project ships (`deploy/rbac.yaml`), for tests that give the
//! reference server exactly those permissions.

use serde_json::Value;

use super::repo;

/// The ClusterRole shipped in deploy/rbac.yaml.
pub(crate) fn shipped_cluster_role() -> Value {
    let text = std::fs::read_to_string(repo().join("deploy/rbac.yaml")).unwrap();
    text.split("\n---")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|d| d["kind"] == "ClusterRole")
        .expect("deploy/rbac.yaml has a ClusterRole")
}
