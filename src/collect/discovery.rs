//! Probes through the API server: the discovery rung of every aggregated group/version, a list of
//! each resource it serves (up to [`LIST_PROBES_PER_GROUP_VERSION`]) and the delegation probe
//! ([`super::delegation`]) once discovery answered, a read of one object of every CRD in each
//! version its conversion webhook converts to, and (only on request) server-side dry-run writes
//! through webhooks.
//!
//! These are the requests a user's client would make, sent through kube-apiserver so that the
//! aggregator really proxies them with real TLS — the only way to see what `Available=True` hides
//! (the availability controller skips CA and SAN checks; docs/diagnosis.md#rule-7). Each outcome is recorded
//! as a probe with its rung, status, latency, APF headers and Status causes, whatever it was.

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use super::fetch::Response;
use super::sources::{Contribution, Found, Run, SourceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::probes::{ClientTool, ProbeKind};
use crate::bundle::{
    Crd, EvidenceBundle, Gap, GapReason, Kind, ObjectRef, Probe, ProbeOrigin, Rung, Webhook,
};

const IN_FLIGHT: usize = 64;

/// A probe record from a response, concerning `target`.
pub fn probe_from(
    method: &str,
    path: &str,
    rung: Rung,
    target: ObjectRef,
    res: &Result<Response, FetchError>,
) -> Probe {
    let mut p = probe_record(method, path, rung, res);
    p.target = Some(target);
    p
}

/// A probe record from a response, concerning no object (kube-apiserver's own filters).
pub fn probe_record(
    method: &str,
    path: &str,
    rung: Rung,
    res: &Result<Response, FetchError>,
) -> Probe {
    let mut p = Probe::new(ProbeOrigin {
        kind: ProbeKind::Probe,
        tool: ClientTool::Extpath,
        files: Vec::new(),
    });
    p.method = Some(method.to_string());
    p.path = Some(path.to_string());
    p.rung = Some(rung);
    p.at = Some(jiff::Timestamp::now());
    match res {
        Ok(r) => {
            p.status = Some(r.status);
            p.latency_ms = Some((r.latency_ms * 10.0).round() / 10.0);
            p.headers = r.headers.clone();
            if !(200..300).contains(&r.status) {
                match r.status_body() {
                    Some(s) => p.status_body = Some(s),
                    None => {
                        let text = r.text();
                        p.body = Some(text.chars().take(2048).collect());
                    }
                }
            }
        }
        Err(e) => p.error = Some(e.to_string()),
    }
    p
}

/// The discovery path of an APIService: `/apis/<group>/<version>`, or `/api/<version>` for core.
// The same path kube-aggregator's availability probe requests (REFERENCE §2.1; the core group's
// APIService is `v1.`, with an empty group), so a failure here is comparable to its condition.
pub fn discovery_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The `groupVersion` a discovery document names, or "" when it is not JSON or names none.
// Kept because the availability probe looks only at the status code (2xx/3xx is `Passed`,
// REFERENCE §2.1): a backend answering another group's document is `Available=True` and still
// breaks discovery clients; the name it gives is what shows it.
pub fn document_group_version(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("groupVersion")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// How many resources of one aggregated group/version the list probe lists, at most.
///
/// An extension server keeps each resource in storage of its own (a key prefix, a table, a cloud
/// API): one object of one resource that no longer decodes, or one backend that is down, fails
/// that resource's lists and nothing else — so listing only the first resource of a group missed
/// a failure users of the second one met on every request. The bound keeps a group that serves
/// hundreds of resources (external metrics) from costing hundreds of requests per scan.
pub const LIST_PROBES_PER_GROUP_VERSION: usize = 8;

/// The resources of an APIResourceList that can be listed (not subresources), in the document's
/// order, at most [`LIST_PROBES_PER_GROUP_VERSION`].
// Subresources appear in the same list as `<resource>/<sub>` (`flunders/status`) and cannot be
// listed on their own.
pub fn listable_resources(doc: &Value) -> Vec<String> {
    doc.get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| {
            let name = r.get("name").and_then(Value::as_str).unwrap_or("/");
            let verbs = r.get("verbs").and_then(Value::as_array);
            !name.is_empty()
                && !name.contains('/')
                && verbs.is_some_and(|v| v.iter().any(|x| x.as_str() == Some("list")))
        })
        .filter_map(|r| r.get("name")?.as_str().map(str::to_string))
        .take(LIST_PROBES_PER_GROUP_VERSION)
        .collect()
}

/// Which probes follow a successful discovery probe.
#[derive(Debug, Clone, Copy)]
pub struct FollowUps {
    /// List one resource of the group/version (`--skip-list-probe` turns it off).
    pub list: bool,
    /// Send the delegation probe ([`super::delegation`]) as an ordinary authenticated user.
    pub delegation: bool,
}

/// Probe every remote APIService: discovery, then — when discovery answered — a list of one
/// resource and the delegation probe, at once.
pub async fn probe_all(
    f: &Fetcher,
    bundle: &EvidenceBundle,
    follow: FollowUps,
    own_user: Option<&str>,
    deadline: Instant,
) -> (Vec<Probe>, Vec<Gap>) {
    let remote: Vec<(String, String, String)> = bundle
        .api_services
        .iter()
        // Local APIServices (no spec.service) are served inside kube-apiserver and always Available
        // with reason `Local` (NewLocalAvailableAPIServiceCondition): no proxied path to probe.
        .filter(|a| !a.is_local())
        .map(|a| (a.name.clone(), a.group.clone(), a.version.clone()))
        .collect();
    let results = futures::stream::iter(remote)
        .map(|(name, group, version)| async move {
            let owner = ObjectRef::cluster(Kind::ApiService, &name);
            let path = discovery_path(&group, &version);
            let res = f
                .request_until(deadline, http::Method::GET, &path, None, &[])
                .await;
            let mut discovery = probe_from("GET", &path, Rung::Discovery, owner.clone(), &res);
            let answered = matches!(&res, Ok(r) if (200..300).contains(&r.status));
            if answered && let Ok(r) = &res {
                discovery.discovery_group_version = Some(document_group_version(&r.body));
            }
            let mut probes = vec![discovery];
            let mut gaps = Vec::new();
            if !answered {
                return (probes, gaps);
            }
            let resources = match &res {
                Ok(r) if follow.list => serde_json::from_slice::<Value>(&r.body)
                    .ok()
                    .as_ref()
                    .map(listable_resources)
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let list = futures::future::join_all(resources.into_iter().map(|resource| {
                let owner = owner.clone();
                let path = &path;
                async move {
                    // A list reaches the extension server's handler, its authorization and its
                    // storage, which a discovery document never does; limit=1 keeps that cheap on
                    // a server with many objects.
                    let list_path = format!("{path}/{resource}?limit=1");
                    let res = f
                        .request_until(deadline, http::Method::GET, &list_path, None, &[])
                        .await;
                    probe_from("GET", &list_path, Rung::Verb, owner, &res)
                }
            }));
            let delegation = async {
                if follow.delegation {
                    Some(super::delegation::probe(f, owner.clone(), &path, deadline).await)
                } else {
                    None
                }
            };
            let (list, delegation) = tokio::join!(list, delegation);
            let mut denied = Vec::new();
            for mut probe in list {
                match own_permission_denied(&probe, own_user) {
                    Some(why) => denied.push(why),
                    None => {
                        // A refusal of another user than the sender: say who sent it, which is
                        // what tells the two apart for the rules.
                        if refuses_another_user(&probe, own_user) {
                            probe.user = own_user.map(str::to_string);
                        }
                        probes.push(probe)
                    }
                }
            }
            // One gap per APIService, as before: the same missing permission for each resource.
            if let Some(why) = denied.first() {
                gaps.push(Gap::new(
                    format!("probes/verb/{owner}"),
                    GapReason::Forbidden,
                    why.clone(),
                ));
            }
            match delegation {
                Some(super::delegation::Outcome::Observed(p)) => probes.push(*p),
                Some(super::delegation::Outcome::Gap(g)) => gaps.push(g),
                None => {}
            }
            (probes, gaps)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    gathered(results)
}

/// The probes and gaps of concurrent probing in one order whatever order they finished in:
/// probes by path and user, gaps by source.
fn gathered(results: Vec<(Vec<Probe>, Vec<Gap>)>) -> (Vec<Probe>, Vec<Gap>) {
    let mut probes = Vec::new();
    let mut gaps = Vec::new();
    for (p, g) in results {
        probes.extend(p);
        gaps.extend(g);
    }
    probes.sort_by(|a, b| (&a.path, &a.user).cmp(&(&b.path, &b.user)));
    gaps.sort_by(|a, b| a.source.cmp(&b.source));
    (probes, gaps)
}

/// The collection path of a CRD's resource in `version`: across all namespaces, or the namespace
/// of one object (`namespace`) and its name.
fn crd_path(crd: &Crd, version: &str, object: Option<(&str, &str)>) -> String {
    let base = format!("/apis/{}/{version}", crd.group);
    match object {
        None => format!("{base}/{}", crd.plural),
        Some(("", name)) => format!("{base}/{}/{name}", crd.plural),
        Some((ns, name)) => format!("{base}/namespaces/{ns}/{}/{name}", crd.plural),
    }
}

/// The storage version of a CRD that converts through a webhook, and the other versions it
/// serves (each read in one of those converts the stored object); `None` when no read converts.
fn converted_versions(crd: &Crd) -> Option<(&str, Vec<&str>)> {
    crd.conversion.webhook.as_ref()?;
    let storage = crd.versions.iter().find(|v| v.storage)?.name.as_str();
    let others: Vec<&str> = crd
        .versions
        .iter()
        .filter(|v| v.served && !v.storage)
        .map(|v| v.name.as_str())
        .collect();
    (!others.is_empty()).then_some((storage, others))
}

/// Read one object of every CRD whose conversion webhook a read converts through, in each served
/// version other than the storage one — what a client of that version does, and the only way to
/// meet a converter slower than the metrics window: no client's read finishes, so no metric
/// moves, while the scan's own read waits (bounded by the fetcher's timeout) or fails in
/// apiextensions-apiserver's words (`conversion webhook for <gvk> failed: …`).
///
/// First a list of the storage version with `limit=1`, which names an object, and a GET of that
/// object in the storage version (the control: no conversion for an object stored in it); only
/// when the control answered, a GET of the object in each other version — so a converted read
/// that fails or does not answer is the converter's. A GET, not a list: a 1.3x kube-apiserver
/// serves lists from a watch cache per version that converted the objects when it filled, while
/// a GET converts on every call (as every read did on 1.24).
pub async fn probe_conversions(
    f: &Fetcher,
    bundle: &EvidenceBundle,
    deadline: Instant,
) -> (Vec<Probe>, Vec<Gap>) {
    // Owned: a stream of borrowed items makes the future's lifetime higher-ranked, which the
    // source table's boxed future cannot name.
    let converting: Vec<Crd> = bundle
        .crds
        .iter()
        .filter(|c| converted_versions(c).is_some())
        .cloned()
        .collect();
    let results = futures::stream::iter(converting)
        .map(|crd| async move { probe_conversion(f, &crd, deadline).await })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    gathered(results)
}

/// [`probe_conversions`] of one CRD (nothing when no read of it converts).
async fn probe_conversion(f: &Fetcher, crd: &Crd, deadline: Instant) -> (Vec<Probe>, Vec<Gap>) {
    let Some((storage, others)) = converted_versions(crd) else {
        return (Vec::new(), Vec::new());
    };
    let owner = ObjectRef::cluster(Kind::CustomResourceDefinition, &crd.name);
    let list_path = format!("{}?limit=1", crd_path(crd, storage, None));
    let res = f
        .request_until(deadline, http::Method::GET, &list_path, None, &[])
        .await;
    let control = probe_from("GET", &list_path, Rung::Verb, owner.clone(), &res);
    // kube-apiserver serves custom resources itself: every 403 here is the collector's own.
    if let Some(why) = own_permission_denied(&control, None) {
        let gap = Gap::new(
            format!("probes/conversion/{owner}"),
            GapReason::Forbidden,
            why,
        );
        return (Vec::new(), vec![gap]);
    }
    let object = match &res {
        Ok(r) if (200..300).contains(&r.status) => first_item(&r.body),
        _ => None,
    };
    let mut probes = vec![control];
    // No object, nothing to convert: apiextensions-apiserver does not call the webhook for an
    // empty list, so there is nothing the scan could read through it.
    let Some((namespace, name)) = object else {
        return (probes, Vec::new());
    };
    // The same object in its storage version, the way the converted reads below fetch it: if
    // this does not answer either, the time goes to storage, not to the converter, and the
    // converted reads would say nothing about it.
    let stored = crd_path(crd, storage, Some((&namespace, &name)));
    let res = f
        .request_until(deadline, http::Method::GET, &stored, None, &[])
        .await;
    let answered = matches!(&res, Ok(r) if (200..300).contains(&r.status));
    probes.push(probe_from("GET", &stored, Rung::Verb, owner.clone(), &res));
    if !answered {
        return (probes, Vec::new());
    }
    for version in others {
        let path = crd_path(crd, version, Some((&namespace, &name)));
        let res = f
            .request_until(deadline, http::Method::GET, &path, None, &[])
            .await;
        probes.push(probe_from(
            "GET",
            &path,
            Rung::Conversion,
            owner.clone(),
            &res,
        ));
    }
    (probes, Vec::new())
}

/// The namespace (`""` for a cluster-scoped object) and name of a list's first item.
fn first_item(body: &[u8]) -> Option<(String, String)> {
    let list: Value = serde_json::from_slice(body).ok()?;
    let meta = list.get("items")?.as_array()?.first()?.get("metadata")?;
    let name = meta.get("name")?.as_str()?.to_string();
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some((namespace, name))
}

/// A 403 on the verb probe that only says the collector itself may not list the resource (the
/// least-privilege ClusterRole does not grant it) is a gap, not evidence. A 403 naming
/// `system:anonymous` is kept: that is the extension server not trusting the front-proxy identity.
/// So is one naming another user than the collector's own (`own_user`, when its credentials say
/// it): kube-apiserver authorizes the sender, so only the extension server can have refused
/// somebody else — it does not see the user the aggregator proxies for (its request-header
/// authenticator rejected the proxy's certificate and another authenticator took the request).
pub fn own_permission_denied(p: &Probe, own_user: Option<&str>) -> Option<String> {
    let s = p.status_body.as_ref()?;
    if p.status != Some(403) || s.reason != "Forbidden" {
        return None;
    }
    if s.message.contains("User \"system:anonymous\"") || refuses_another_user(p, own_user) {
        return None;
    }
    Some(format!("the collector may not list it: {}", s.message))
}

/// The user a 403 `Status` names (`… is forbidden: User "NAME" cannot …`).
fn refused_user(p: &Probe) -> Option<&str> {
    let m = &p.status_body.as_ref()?.message;
    let rest = &m[m.find("User \"")? + "User \"".len()..];
    Some(&rest[..rest.find('"')?])
}

/// A 403 naming a user other than the collector's own, known one.
fn refuses_another_user(p: &Probe, own_user: Option<&str>) -> bool {
    p.status == Some(403)
        && own_user
            .is_some_and(|own| refused_user(p).is_some_and(|u| u != own && u != "system:anonymous"))
}

/// A harmless object a webhook's rules match, and where to create it: a ConfigMap, when the webhook
/// intercepts CREATE of configmaps (or everything) in some namespace its selector matches.
fn admission_probe_for(
    w: &Webhook,
    namespaces: &[(String, std::collections::BTreeMap<String, String>)],
    preferred: &str,
) -> Option<(String, Value)> {
    let covers = w.rules.iter().any(|r| {
        let op = r.operations.iter().any(|o| o == "CREATE" || o == "*");
        let group = r.api_groups.iter().any(|g| g.is_empty() || g == "*");
        let res = r
            .resources
            .iter()
            .any(|x| x == "configmaps" || x == "*" || x == "*/*");
        op && group && res
    });
    if !covers {
        return None;
    }
    // The namespace given with -n when the webhook looks there, else the first one it looks at.
    let (ns, _) = namespaces
        .iter()
        .filter(|(_, labels)| w.namespace_selector.matches(labels))
        .min_by_key(|(name, _)| name.as_str() != preferred)?;
    let labels: serde_json::Map<String, Value> = w
        .object_selector
        .match_labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"generateName": "extpath-probe-", "namespace": ns, "labels": labels},
        "data": {"purpose": "extpath admission probe (server-side dry run; never stored)"}
    });
    Some((ns.clone(), object))
}

/// Server-side dry-run creates through each webhook that intercepts ConfigMap creation.
/// Never without `dryRun=All`.
pub async fn probe_admission(
    f: &Fetcher,
    bundle: &EvidenceBundle,
    preferred_namespace: &str,
    deadline: Instant,
) -> (Vec<Probe>, Vec<Gap>) {
    let mut gaps = Vec::new();
    let namespaces: Vec<(String, std::collections::BTreeMap<String, String>)> =
        match f.list_all("/api/v1/namespaces").await {
            Ok(items) => items
                .iter()
                .filter_map(|n| {
                    let name = n.pointer("/metadata/name")?.as_str()?.to_string();
                    let labels = n
                        .pointer("/metadata/labels")
                        .and_then(|l| serde_json::from_value(l.clone()).ok())
                        .unwrap_or_default();
                    Some((name, labels))
                })
                .collect(),
            Err(e) => {
                gaps.push(Gap::new("probes/admission", e.gap_reason(), e.to_string()));
                return (Vec::new(), gaps);
            }
        };
    let mut probes = Vec::new();
    for w in &bundle.webhooks {
        let owner = ObjectRef::cluster(w.kind.object_kind(), &w.name);
        let Some((ns, object)) = admission_probe_for(w, &namespaces, preferred_namespace) else {
            gaps.push(Gap::new(
                format!("probes/admission/{owner}"),
                GapReason::NotSupplied,
                "no harmless object (a ConfigMap) in a matching namespace is intercepted by this webhook",
            ));
            continue;
        };
        // dryRun=All calls every matching webhook whose sideEffects is None or NoneOnDryRun and
        // persists nothing; one declaring Some or Unknown makes the API server refuse the dry run
        // with 400 instead of calling it, which the probe records as it comes.
        let path = format!("/api/v1/namespaces/{ns}/configmaps?dryRun=All");
        let body = serde_json::to_vec(&object).unwrap_or_default();
        let res = f
            .request_until(deadline, http::Method::POST, &path, Some(body), &[])
            .await;
        probes.push(probe_from("POST", &path, Rung::Admission, owner, &res));
    }
    (probes, gaps)
}

/// The `probes/discovery` entry (stage two): every group/version stage one's objects name.
pub(super) fn probes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let follow = FollowUps {
            list: run.opts.list_probe,
            delegation: run.opts.delegation_probe,
        };
        let conversions = async {
            if follow.list {
                probe_conversions(&run.fetcher, found.bundle, run.deadline).await
            } else {
                (Vec::new(), Vec::new())
            }
        };
        let ((mut probes, mut gaps), (converted, conversion_gaps)) = tokio::join!(
            probe_all(
                &run.fetcher,
                found.bundle,
                follow,
                run.own_user.as_deref(),
                run.deadline
            ),
            conversions
        );
        probes.extend(converted);
        gaps.extend(conversion_gaps);
        Ok(Contribution {
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}

/// The `probes/admission` entry (stage two, `--probe-admission`): dry-run creates through the
/// webhooks stage one found.
pub(super) fn admission_probes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let (probes, gaps) = probe_admission(
            &run.fetcher,
            found.bundle,
            &run.opts.namespace,
            run.deadline,
        )
        .await;
        Ok(Contribution {
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{LabelSelector, WebhookRule};

    #[test]
    fn the_list_probe_lists_every_listable_top_level_resource() {
        let doc = serde_json::json!({"resources": [
            {"name": "flunders/status", "verbs": ["get"]},
            {"name": "fischers", "verbs": ["get"]},
            {"name": "flunders", "verbs": ["get", "list", "watch"]},
            {"name": "fischers", "verbs": ["list"]}
        ]});
        assert_eq!(listable_resources(&doc), ["flunders", "fischers"]);
        let many: Vec<Value> = (0..20)
            .map(|i| serde_json::json!({"name": format!("r{i}"), "verbs": ["list"]}))
            .collect();
        assert_eq!(
            listable_resources(&serde_json::json!({ "resources": many })).len(),
            LIST_PROBES_PER_GROUP_VERSION
        );
        assert!(listable_resources(&serde_json::json!({"kind": "Status"})).is_empty());
        assert_eq!(discovery_path("", "v1"), "/api/v1");
        let gv = br#"{"kind":"APIResourceList","groupVersion":"a.io/v1","resources":[]}"#;
        assert_eq!(document_group_version(gv), "a.io/v1");
        assert_eq!(document_group_version(b"{\"kind\":\"Status\"}"), "");
        assert_eq!(document_group_version(b"service unavailable"), "");
    }

    #[test]
    fn a_refusal_of_another_user_than_the_sender_is_evidence_not_a_gap() {
        let refused = |user: &str| {
            let mut p = Probe::new(ProbeOrigin {
                kind: ProbeKind::Probe,
                tool: ClientTool::Extpath,
                files: Vec::new(),
            });
            p.status = Some(403);
            p.status_body = Some(crate::bundle::StatusBody {
                message: format!(
                    "fischers.wardle.example.com is forbidden: User \"{user}\" cannot list resource \"fischers\" in API group \"wardle.example.com\" at the cluster scope"
                ),
                reason: "Forbidden".into(),
                ..Default::default()
            });
            p
        };
        // The collector's own missing permission, or a sender the credentials do not name: a gap.
        assert!(own_permission_denied(&refused("gate"), Some("gate")).is_some());
        assert!(own_permission_denied(&refused("front-proxy-client"), None).is_some());
        // The extension refusing the proxy certificate's own name: evidence.
        let other = refused("front-proxy-client");
        assert!(own_permission_denied(&other, Some("extpath-test-admin")).is_none());
        assert!(refuses_another_user(&other, Some("extpath-test-admin")));
        // Anonymous is kept whoever sent it, by the older rule.
        assert!(own_permission_denied(&refused("system:anonymous"), None).is_none());
        assert!(!refuses_another_user(
            &refused("system:anonymous"),
            Some("admin")
        ));
    }

    #[test]
    fn admission_probes_go_where_the_webhook_looks() {
        let mut w = Webhook {
            name: "w".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec!["".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["configmaps".into()],
                scope: None,
            }],
            ..Webhook::default()
        };
        w.namespace_selector = LabelSelector {
            match_labels: [("team".to_string(), "a".to_string())].into(),
            match_expressions: vec![],
        };
        let nss = vec![
            ("default".to_string(), Default::default()),
            (
                "a".to_string(),
                [("team".to_string(), "a".to_string())].into(),
            ),
        ];
        let (ns, obj) = admission_probe_for(&w, &nss, "default").unwrap();
        assert_eq!(ns, "a");
        assert_eq!(obj["kind"], "ConfigMap");
        w.namespace_selector = LabelSelector::default();
        assert_eq!(admission_probe_for(&w, &nss, "a").unwrap().0, "a");
        assert_eq!(admission_probe_for(&w, &nss, "zz").unwrap().0, "default");
        w.rules[0].resources = vec!["pods".into()];
        assert!(admission_probe_for(&w, &nss, "a").is_none());
    }
}
