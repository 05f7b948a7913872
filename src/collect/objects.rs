//! Stage-one object collectors: `/version`, APIServices, webhook configurations, CRDs.
//!
//! Each is a paginated list decoded into the k8s-openapi type and handed to the shared
//! `bundle::from_k8s` transform. An item that does not decode is skipped with a gap naming it (one
//! odd object must not hide the other 499).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::sources::{Evidence, EvidenceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::{EvidenceBundle, Gap, GapReason, ServerVersion, from_k8s};

/// Decode list items into `T`, with a gap per item that does not decode.
pub fn decode_items<T: DeserializeOwned>(source: &str, items: Vec<Value>) -> (Vec<T>, Vec<Gap>) {
    let mut ok = Vec::new();
    let mut gaps = Vec::new();
    for item in items {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        // One object that does not decode (a field a newer server added with an odd type, a
        // hand-edited object) must not hide the others: it becomes a gap naming it, so the
        // verdicts say which subject could not be judged instead of judging none.
        match serde_json::from_value::<T>(item) {
            Ok(v) => ok.push(v),
            Err(e) => gaps.push(Gap::new(
                format!("{source}/{name}"),
                GapReason::Error,
                format!("does not decode: {e}"),
            )),
        }
    }
    (ok, gaps)
}

/// List `path`, decode each item into `T`, and add it with `add` (items that do not decode are
/// gaps under `source`).
pub(crate) fn list_then<'a, T, F>(
    f: &'a Fetcher,
    source: &'static str,
    path: &'static str,
    add: F,
) -> EvidenceFuture<'a>
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(&mut EvidenceBundle, &T) + Send + 'static,
{
    Box::pin(async move {
        let items = f.list_all(path).await?;
        let (objs, gaps) = decode_items::<T>(source, items);
        let apply: Evidence = Box::new(move |b: &mut EvidenceBundle| {
            for o in &objs {
                add(b, o);
            }
            b.gaps.extend(gaps);
        });
        Ok(apply)
    })
}

/// The gap source of `/version`.
pub const GAP_VERSION: &str = "version";

/// `/version`.
pub fn fetch_version(f: &Fetcher) -> EvidenceFuture<'_> {
    Box::pin(async move {
        let v = f.get_json("/version").await?;
        let version = version_of(&v).ok_or_else(|| FetchError::Decode("no gitVersion".into()))?;
        let apply: Evidence =
            Box::new(move |b: &mut EvidenceBundle| b.collection.server_version = Some(version));
        Ok(apply)
    })
}

/// The bundle form of a `/version` document.
pub fn version_of(v: &Value) -> Option<ServerVersion> {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let git_version = s("gitVersion");
    if git_version.is_empty() {
        return None;
    }
    Some(ServerVersion {
        git_version,
        major: s("major"),
        minor: s("minor"),
    })
}

// Stage one lists fixed v1 paths, unlike flowcontrol which discovers its version: apiregistration,
// admissionregistration and apiextensions have all been v1 since 1.16 and lost v1beta1 by 1.22,
// so every cluster extpath supports (1.24 on, DESIGN §5) serves exactly these.

/// APIServices.
pub fn fetch_api_services(f: &Fetcher) -> EvidenceFuture<'_> {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    list_then::<APIService, _>(
        f,
        "objects/apiservices",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        |b, o| from_k8s::add_api_service(b, o, None),
    )
}

/// ValidatingWebhookConfigurations.
pub fn fetch_validating_webhooks(f: &Fetcher) -> EvidenceFuture<'_> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    list_then::<ValidatingWebhookConfiguration, _>(
        f,
        "objects/validatingwebhookconfigurations",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        |b, o| from_k8s::add_validating_configuration(b, o, None),
    )
}

/// MutatingWebhookConfigurations.
pub fn fetch_mutating_webhooks(f: &Fetcher) -> EvidenceFuture<'_> {
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    list_then::<MutatingWebhookConfiguration, _>(
        f,
        "objects/mutatingwebhookconfigurations",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        |b, o| from_k8s::add_mutating_configuration(b, o, None),
    )
}

/// CustomResourceDefinitions.
pub fn fetch_crds(f: &Fetcher) -> EvidenceFuture<'_> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    list_then::<CustomResourceDefinition, _>(
        f,
        "objects/customresourcedefinitions",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        |b, o| from_k8s::add_crd(b, o, None),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undecodable_item_is_a_gap_not_a_failure() {
        let items = vec![
            serde_json::json!({"metadata": {"name": "ok"}, "spec": {"groupPriorityMinimum": 1, "versionPriority": 1}}),
            serde_json::json!({"metadata": {"name": "bad"}, "spec": {"groupPriorityMinimum": "x"}}),
        ];
        let (ok, gaps) = decode_items::<
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        >("objects/apiservices", items);
        assert_eq!(ok.len(), 1);
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].source, "objects/apiservices/bad");
    }

    #[test]
    fn version_documents_map() {
        let v =
            version_of(&serde_json::json!({"gitVersion": "v1.30.14", "major": "1", "minor": "30"}))
                .unwrap();
        assert_eq!(v.major_minor(), Some((1, 30)));
        assert!(version_of(&serde_json::json!({})).is_none());
    }
}
