//! Aggregation: the path APIService → Service → endpoint → TLS → extension server breaks, each
//! by a different mechanism.

use super::{Checks, Expect, SETTLE, Scan, analyze_raw, on_both, scan, why};
use crate::util::k8s::extension::{APISERVICE, Extension, GROUP_VERSION, Placement};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::{Assets, ControlPlane};

fn on_apiservice() -> Expect {
    Expect::Problem {
        class: "Aggregation",
        kind: "APIService",
        name: APISERVICE.into(),
        severity: "critical",
    }
}

/// Wait until discovery of the extension's group/version through the aggregator fails.
fn wait_discovery_fails(cp: &ControlPlane) {
    let path = format!("/apis/{GROUP_VERSION}");
    cp.poll("discovery through the aggregator fails", SETTLE, || {
        (cp.raw_get(&path).0 != 200).then_some(())
    });
}

/// The extension server's process is killed (a crash, an OOM kill). Also judged by `why` on a
/// client's request and by `analyze --raw` of what the on-call engineer saved.
fn extension_killed(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(&cp, Placement::default());
    ext.daemon.signal("KILL");
    let _ = ext.daemon.wait_exit();
    wait_discovery_fails(&cp);
    let path = format!("/apis/{GROUP_VERSION}/namespaces/default/flunders");
    let mut incident = Incident::new();
    incident.usual(&cp);
    incident.kubectl(&cp, "kubectl-get-flunders", &["get", "flunders", "-v=6"]);
    incident.curl_apiserver(&cp, "curl-flunders", &path, &[]);
    vec![
        (scan(&cp, &[]), on_apiservice()),
        (
            why(&cp, "GET", &path, &[]),
            Expect::Request {
                class: "Aggregation",
                severity: "critical",
            },
        ),
        (analyze_raw(incident.path()), on_apiservice()),
    ]
    .into()
}
on_both!(extension_killed);

/// The extension server is frozen (SIGSTOP: a stuck process, a node under memory pressure): it
/// accepts connections and never answers.
fn extension_frozen(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(
        &cp,
        Placement {
            namespace: "metrics-ext".into(),
            service: "frozen-api".into(),
        },
    );
    ext.daemon.signal("STOP");
    wait_discovery_fails(&cp);
    let s = scan(&cp, &[]);
    ext.daemon.signal("CONT");
    (s, on_apiservice())
}
on_both!(extension_frozen);

/// The Service the APIService names is deleted.
fn service_deleted(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, Placement::default());
    cp.kubectl(&[
        "delete",
        "service",
        "-n",
        &ext.placement.namespace,
        &ext.placement.service,
    ]);
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice())
}
on_both!(service_deleted);

/// The APIService's caBundle is replaced by an unrelated CA (a rotation that updated one side).
fn cabundle_wrong_ca(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let _ext = Extension::start(&cp, Placement::default());
    let other =
        extpath::pki::generate::TestCa::new("rotated-ca", crate::util::k8s::pki::valid_now())
            .unwrap();
    let ca = base64_of(&other.cert_pem);
    cp.kubectl(&[
        "patch",
        "apiservice",
        APISERVICE,
        "--type=merge",
        "-p",
        &format!(r#"{{"spec":{{"caBundle":"{ca}"}}}}"#),
    ]);
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice())
}
on_both!(cabundle_wrong_ca);

/// The extension's serving certificate expired (it was restarted with the expired one a
/// cert-manager outage left behind).
fn serving_cert_expired(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(&cp, Placement::default());
    let names = crate::util::k8s::extension::serving_names(&ext.placement);
    let expired = cp.pki.backends_ca.issue(
        "extension-expired",
        &extpath::pki::generate::LeafSpec::server(&names, expired_now()),
    );
    ext.restart_with_certificate(&cp, &expired);
    ext.wait_ready_direct();
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice())
}
on_both!(serving_cert_expired);

/// Replace the extension's ExternalName Service by a ClusterIP one exposing `service_port`, with
/// Endpoints and an EndpointSlice (no controller runs here to write them), ready or not — what a
/// Deployment behind a Service looks like to the aggregator. The endpoint's address is from
/// TEST-NET-1 (Endpoints refuse loopback addresses); it is never dialled: without
/// `--enable-aggregator-routing` the aggregator dials the Service's cluster IP, which is in the
/// loopback range here and refuses.
fn cluster_ip_service(cp: &ControlPlane, ext: &Extension, service_port: u16, ready: bool) {
    let (ns, svc, port) = (&ext.placement.namespace, &ext.placement.service, ext.port);
    cp.kubectl(&["delete", "service", "-n", ns, svc]);
    let addresses = if ready {
        "addresses"
    } else {
        "notReadyAddresses"
    };
    cp.apply(&format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {svc}, namespace: {ns}}}
spec:
  selector: {{app: extension}}
  ports: [{{name: https, port: {service_port}, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: {svc}, namespace: {ns}}}
subsets:
- {addresses}: [{{ip: 192.0.2.10}}]
  ports: [{{name: https, port: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {svc}-x1
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {svc}}}
addressType: IPv4
endpoints:
- addresses: [192.0.2.10]
  conditions: {{ready: {ready}, serving: {ready}}}
ports: [{{name: https, port: {port}}}]
"#
    ));
}

/// Invented from kube-aggregator's availability controller (`available_controller.go`, the
/// `ServicePortError` branch): the APIService names a port its ClusterIP Service does not expose —
/// the Service's port was edited and the APIService did not follow.
fn service_port_not_on_service(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, Placement::default());
    let other = if ext.port == 65535 {
        1024
    } else {
        ext.port + 1
    };
    cluster_ip_service(&cp, &ext, other, true);
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice())
}
on_both!(service_port_not_on_service);

/// The Service's only endpoint is not ready (its Pod fails its readiness probe): the aggregator
/// has nowhere to send requests.
fn endpoints_not_ready(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, Placement::default());
    cluster_ip_service(&cp, &ext, ext.port, false);
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice())
}
on_both!(endpoints_not_ready);

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn expired_now() -> extpath::pki::generate::Validity {
    extpath::pki::generate::Validity::expired_at(jiff::Timestamp::now())
}
