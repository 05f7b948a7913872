//! The least-privilege ClusterRole the project ships (`deploy/rbac.yaml`), for tests that give the
//! reference server exactly those permissions.

use serde_json::Value;

use super::repo;

/// The ClusterRole shipped in deploy/rbac.yaml.
///
/// Read from the file, not copied into tests, so a rule the collector starts needing without the
/// shipped role granting it fails a test instead of failing on the first real cluster with a 403.
pub(crate) fn shipped_cluster_role() -> Value {
    let text = std::fs::read_to_string(repo().join("deploy/rbac.yaml")).unwrap();
    text.split("\n---")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|d| d["kind"] == "ClusterRole")
        .expect("deploy/rbac.yaml has a ClusterRole")
}
