//! The round trip `from_k8s(to_k8s(x)) == x` on a bundle with one of every object, every field set.

use super::*;
use crate::bundle::{CollectionSource, from_k8s, rbac};

/// What a collection makes of the objects: the `from_k8s` mapping of each, by kind.
fn read_back(objects: &[Value]) -> EvidenceBundle {
    let mut b = EvidenceBundle::new(CollectionSource::Unknown);
    for o in objects {
        let o = o.clone();
        match o["kind"].as_str().unwrap() {
            "APIService" => {
                from_k8s::add_api_service(&mut b, &serde_json::from_value(o).unwrap(), None)
            }
            "Service" => from_k8s::add_service(&mut b, &serde_json::from_value(o).unwrap()),
            "Endpoints" => from_k8s::add_endpoints(&mut b, &serde_json::from_value(o).unwrap()),
            "EndpointSlice" => {
                from_k8s::add_endpoint_slice(&mut b, &serde_json::from_value(o).unwrap())
            }
            "Pod" => from_k8s::add_pod(&mut b, &serde_json::from_value(o).unwrap()),
            "ValidatingWebhookConfiguration" => from_k8s::add_validating_configuration(
                &mut b,
                &serde_json::from_value(o).unwrap(),
                None,
            ),
            "MutatingWebhookConfiguration" => from_k8s::add_mutating_configuration(
                &mut b,
                &serde_json::from_value(o).unwrap(),
                None,
            ),
            "CustomResourceDefinition" => {
                from_k8s::add_crd(&mut b, &serde_json::from_value(o).unwrap(), None)
            }
            "FlowSchema" => from_k8s::add_flow_schema(&mut b, &o),
            "PriorityLevelConfiguration" => from_k8s::add_priority_level(&mut b, &o),
            "Event" => from_k8s::add_event(&mut b, &serde_json::from_value(o).unwrap()),
            "ClusterRole" => rbac::add_cluster_role(&mut b, &serde_json::from_value(o).unwrap()),
            "Role" => rbac::add_role(&mut b, &serde_json::from_value(o).unwrap()),
            "ClusterRoleBinding" => {
                rbac::add_cluster_role_binding(&mut b, &serde_json::from_value(o).unwrap())
            }
            "RoleBinding" => rbac::add_role_binding(&mut b, &serde_json::from_value(o).unwrap()),
            other => panic!("unexpected kind {other}"),
        }
    }
    b
}

fn ca_pem() -> String {
    let at: jiff::Timestamp = "2026-11-29T08:00:00Z".parse().unwrap();
    let validity = crate::pki::generate::Validity::around(at, 30, 3650);
    crate::pki::generate::TestCa::new("replay-ca", validity)
        .unwrap()
        .cert_pem
}

/// A bundle with one of every object, every field set as `from_k8s` would set it.
fn sample() -> EvidenceBundle {
    let yaml = r#"
apiVersion: extpath.dev/v1alpha1
kind: EvidenceBundle
collection: {tool_version: 0.1.0}
api_services:
  - {name: v1., group: "", version: v1, group_priority_minimum: 18000, version_priority: 1,
 conditions: [{type: Available, status: "True", reason: Local, message: Local APIServices are always available, last_transition_time: "2026-11-29T08:00:00Z"}]}
  - {name: v1alpha1.wardle.example.com, group: wardle.example.com, version: v1alpha1,
 service: {namespace: wardle, name: api, port: 8443}, ca_bundle_present: true, insecure_skip_tls_verify: true,
 group_priority_minimum: 1000, version_priority: 15,
 conditions: [{type: Available, status: "False", reason: FailedDiscoveryCheck, message: "failing or missing response from https://10.0.0.1:443/apis/wardle.example.com/v1alpha1: connection refused"}]}
services:
  - {namespace: wardle, name: api, type: ClusterIP, cluster_ip: 10.96.0.10, ports: [{name: https, port: 443, target_port: "8443", protocol: TCP}, {port: 80, target_port: http, protocol: UDP}], selector: {app: wardle}}
  - {namespace: ext, name: named, type: ExternalName, external_name: api.example.com}
endpoints:
  - {namespace: wardle, name: api, subsets: [{ready: [{ip: 10.244.0.5, target_ref: {kind: Pod, namespace: wardle, name: api-0}}], not_ready: [{ip: 10.244.0.6}], ports: [{name: https, port: 8443}]}]}
endpoint_slices:
  - {namespace: wardle, name: api-x7k2p, service_name: api, address_type: IPv4,
 endpoints: [{addresses: [10.244.0.5], ready: true, serving: true, terminating: false, target_ref: {kind: Pod, namespace: wardle, name: api-0}}, {addresses: [10.244.0.6]}],
 ports: [{name: https, port: 8443}]}
pods:
  - {namespace: wardle, name: api-0, labels: {app: wardle}, phase: Running, ready: true, restarts: 0, service_account: wardle-apiserver}
  - {namespace: wardle, name: api-1, phase: Running, ready: false, restarts: 7, container_problems: ["server: CrashLoopBackOff", "sidecar: Error"]}
  - {namespace: wardle, name: api-2, phase: Running, ready: true, restarts: 2}
webhooks:
  - {kind: Validating, configuration: guard, name: a.guard.example.com,
 target: {service: {namespace: hooks, name: guard, port: 443, path: /validate}, ca_bundle_present: true},
 timeout_seconds: 5, effective_timeout_seconds: 5, failure_policy: Ignore, match_policy: Exact, side_effects: None,
 rules: [{operations: [CREATE, UPDATE], api_groups: [""], api_versions: [v1], resources: [configmaps], scope: Namespaced}],
 namespace_selector: {match_expressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]},
 object_selector: {match_labels: {guarded: "yes"}}, match_conditions: 2, admission_review_versions: [v1, v1beta1]}
  - {kind: Validating, configuration: guard, name: b.guard.example.com, target: {url: "https://hook.example.com:9443/x"},
 effective_timeout_seconds: 10, failure_policy: Fail, match_policy: Equivalent, side_effects: NoneOnDryRun, admission_review_versions: [v1]}
  - {kind: Mutating, configuration: inject, name: inject.example.com, target: {service: {namespace: hooks, name: inject, port: 8443}},
 effective_timeout_seconds: 10, failure_policy: Fail, match_policy: Equivalent, side_effects: None, reinvocation_policy: IfNeeded, admission_review_versions: [v1]}
crds:
  - {name: widgets.conv.example.com, group: conv.example.com, kind: Widget, plural: widgets, scope: Namespaced,
 versions: [{name: v1, served: true, storage: true}, {name: v2, served: true, storage: false, deprecated: true}],
 stored_versions: [v1], conversion: {strategy: Webhook, webhook: {service: {namespace: conv, name: conv, port: 443, path: /convert}, ca_bundle_present: false}, review_versions: [v1]},
 conditions: [{type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted}]}
  - {name: plains.conv.example.com, group: conv.example.com, kind: Plain, plural: plains, scope: Cluster, versions: [{name: v1, served: true, storage: true}], conversion: {strategy: None}}
flow_schemas:
  - {name: service-accounts, api_version: flowcontrol.apiserver.k8s.io/v1beta2, uid: 1234-abcd, matching_precedence: 9000, priority_level: workload-low, distinguisher: ByUser,
 rules: [{subjects: [{kind: Group, name: "system:serviceaccounts"}, {kind: User, name: alice}, {kind: ServiceAccount, name: kube-system/*}], verbs: ["*"], api_groups: ["*"], resources: ["*"]},
         {subjects: [{kind: Group, name: "system:authenticated"}], verbs: [get], non_resource_urls: [/healthz, /livez]}],
 conditions: [{type: Dangling, status: "False", reason: Found, message: "This FlowSchema references the PriorityLevelConfiguration object named \"workload-low\" and it exists"}]}
priority_levels:
  - {name: workload-low, api_version: flowcontrol.apiserver.k8s.io/v1beta2, uid: 5678-ef, type: Limited, concurrency_shares: 100, limit_response: Queue, queues: 128, hand_size: 6, queue_length_limit: 50}
  - {name: tiny, api_version: flowcontrol.apiserver.k8s.io/v1, uid: "", type: Limited, concurrency_shares: 1, lendable_percent: 0, limit_response: Reject}
  - {name: exempt, api_version: flowcontrol.apiserver.k8s.io/v1, uid: ex, type: Exempt}
cluster_roles:
  - {name: "system:auth-delegator", labels: {kubernetes.io/bootstrapping: rbac-defaults},
 rules: [{verbs: [create], api_groups: [authentication.k8s.io], resources: [tokenreviews]}, {verbs: [create], api_groups: [authorization.k8s.io], resources: [subjectaccessreviews]}]}
  - {name: aggregated, aggregation_selectors: [{match_labels: {agg: "true"}}, {}],
 rules: [{verbs: [get], non_resource_urls: ["/healthz", "/apis/*"]}, {verbs: ["*"], api_groups: ["*"], resources: ["*"], resource_names: [one]}]}
cluster_role_bindings:
  - {name: "wardle:system:auth-delegator", role_ref: {kind: ClusterRole, name: "system:auth-delegator"},
 subjects: [{kind: ServiceAccount, name: wardle-apiserver, namespace: wardle}, {kind: User, name: alice}, {kind: Group, name: "system:masters"}]}
roles:
  - {namespace: kube-system, name: extension-apiserver-authentication-reader,
 rules: [{verbs: [get, list, watch], api_groups: [""], resources: [configmaps], resource_names: [extension-apiserver-authentication]}]}
role_bindings:
  - {namespace: kube-system, name: wardle-auth-reader, role_ref: {kind: Role, name: extension-apiserver-authentication-reader},
 subjects: [{kind: ServiceAccount, name: wardle-apiserver, namespace: wardle}, {kind: ServiceAccount, name: local}]}
events:
  - {involved: {kind: Pod, name: api-1, namespace: wardle}, type: Warning, reason: BackOff, message: Back-off restarting failed container, count: 12, last_seen: "2026-11-29T08:59:00Z"}
  - {involved: {kind: APIService, name: v1alpha1.wardle.example.com}, type: Normal, reason: Updated, message: status changed, count: 1}
"#;
    let mut b = crate::bundle::load_bundle_str(yaml, "sample.yaml").unwrap();
    let pem = ca_pem();
    for owner in [
        ObjectRef::cluster(Kind::ApiService, "v1alpha1.wardle.example.com"),
        ObjectRef::cluster(Kind::ValidatingWebhook, "a.guard.example.com"),
    ] {
        from_k8s::add_ca_bundle(&mut b, &owner, pem.as_bytes(), None);
    }
    b
}

#[test]
fn objects_read_back_as_the_bundle_they_came_from() {
    let b = sample();
    let back = read_back(&objects(&b));
    assert_eq!(back.api_services, b.api_services);
    assert_eq!(back.services, b.services);
    assert_eq!(back.endpoints, b.endpoints);
    assert_eq!(back.endpoint_slices, b.endpoint_slices);
    assert_eq!(back.pods, b.pods);
    assert_eq!(back.webhooks, b.webhooks);
    assert_eq!(back.crds, b.crds);
    assert_eq!(back.flow_schemas, b.flow_schemas);
    assert_eq!(back.priority_levels, b.priority_levels);
    assert_eq!(back.events, b.events);
    assert_eq!(back.cluster_roles, b.cluster_roles);
    assert_eq!(back.cluster_role_bindings, b.cluster_role_bindings);
    assert_eq!(back.roles, b.roles);
    assert_eq!(back.role_bindings, b.role_bindings);
    assert_eq!(back.certificates, b.certificates);
    assert!(back.gaps.is_empty(), "{:?}", back.gaps);
}

#[test]
fn a_ca_bundle_without_pem_keeps_the_field_and_decodes_to_nothing() {
    let mut b = sample();
    for c in &mut b.certificates {
        c.pem = None;
    }
    let owner = ObjectRef::cluster(Kind::ApiService, "v1alpha1.wardle.example.com");
    assert_eq!(ca_bundle(&b, &owner), CaBundle::Unservable);
    let back = read_back(&objects(&b));
    assert!(back.api_services[1].ca_bundle_present);
    assert!(back.certificates.is_empty());
    assert!(
        back.gaps
            .iter()
            .any(|g| g.source == "tls/APIService/v1alpha1.wardle.example.com/caBundle")
    );
}
