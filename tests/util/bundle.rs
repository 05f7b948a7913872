//! Reading an evidence bundle (as JSON) in the collection tests: its gaps as `(source, reason)`.

use serde_json::Value;

/// The gaps besides the two every collection without `--etcd-metrics-url` records (etcd's own
/// health and alarms not checked).
///
/// Those two are expected on every managed cluster, where etcd is not reachable from a client;
/// a test that asserts "no gaps" means "nothing it could have collected was missed".
pub(crate) fn gaps_beyond_etcd(b: &Value) -> Vec<(String, String)> {
    gaps(b)
        .into_iter()
        .filter(|(s, r)| !(s.starts_with("health/etcd") && r == "not_supplied"))
        .collect()
}

/// Every gap of the bundle as `(source, reason)`, in bundle order.
pub(crate) fn gaps(b: &Value) -> Vec<(String, String)> {
    b["gaps"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|g| {
            (
                g["source"].as_str().unwrap_or_default().to_string(),
                g["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}
