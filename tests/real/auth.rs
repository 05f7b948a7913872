//! Auth: the delegated authentication and authorization of an aggregated API, and kube-apiserver's
//! own authorizer, broken by different mechanisms — RBAC objects deleted, flags changed, a
//! certificate expired, an authorization webhook that refuses.
//!
//! Most of these are invisible to a scan's own identity (a cluster admin in `system:masters`): the
//! extension's delegating authorizer and kube-apiserver's RBAC allow it before anything that broke
//! is asked. The cases wait until an ordinary user (`alice`, group `wardle-users`) is refused, as
//! production would notice, and then scan as the admin.

use std::path::{Path, PathBuf};

use super::{Checks, Expect, SETTLE, Scan, analyze_raw, on_both, scan, why};
use crate::util::k8s::extension::{
    APISERVICE, Extension, GROUP_VERSION, Placement, apiservice_available,
};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::pki::{KeyPairFiles, users, valid_now};
use crate::util::k8s::{Assets, ControlPlane};
use extpath::pki::generate::{LeafSpec, Validity};

fn on_apiservice(class: &'static str) -> Expect {
    Expect::Problem {
        class,
        kind: "APIService",
        name: APISERVICE.into(),
        severity: "critical",
    }
}

fn placement(namespace: &str, service: &str) -> Placement {
    Placement {
        namespace: namespace.into(),
        service: service.into(),
    }
}

/// A list of the extension's flunders in its own namespace.
fn flunders(ext: &Extension) -> String {
    format!(
        "/apis/{GROUP_VERSION}/namespaces/{}/flunders",
        ext.placement.namespace
    )
}

/// Wait until `alice` (who has RBAC on the aggregated group) gets `status` listing flunders; the
/// answer's body.
fn wait_alice_gets(cp: &ControlPlane, ext: &Extension, status: u16) -> String {
    let path = flunders(ext);
    cp.poll(&format!("alice gets {status} on {path}"), SETTLE, || {
        let (code, body) = cp.raw_get_as_token(users::ALICE.1, &path);
        (code == status).then_some(body)
    })
}

/// Wait until discovery of the extension's group/version through the aggregator fails (for the
/// admin too).
fn wait_discovery_fails(cp: &ControlPlane) {
    let path = format!("/apis/{GROUP_VERSION}");
    cp.poll("discovery through the aggregator fails", SETTLE, || {
        (cp.raw_get(&path).0 != 200).then_some(())
    });
}

/// The extension's identity loses `system:auth-delegator` (its ClusterRoleBinding is deleted):
/// its SubjectAccessReviews are forbidden, so every user outside `system:masters` gets 500 while
/// the admin and the availability check are served (captures 08a).
fn auth_delegator_removed(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("tenant-apis", "wardle"));
    let (ns, svc) = (&ext.placement.namespace, &ext.placement.service);
    cp.kubectl(&[
        "delete",
        "clusterrolebinding",
        &format!("{ns}:{svc}:auth-delegator"),
    ]);
    let body = wait_alice_gets(&cp, &ext, 500);
    assert!(body.contains("subjectaccessreviews"), "{body}");
    (scan(&cp, &[]), on_apiservice("Auth"))
}
on_both!(auth_delegator_removed);

/// The extension's identity loses `extension-apiserver-authentication-reader` in kube-system and
/// the extension is restarted: it cannot load the front-proxy configuration and exits at start
/// (captures 08b). The scan sees what the aggregator sees — a backend that refuses connections —
/// and has no log of the extension's (it runs outside the cluster, no Pod): the visible layer,
/// Aggregation, is what the evidence proves.
fn auth_reader_removed(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(&cp, placement("wardle-prod", "apiserver"));
    let (ns, svc) = (
        ext.placement.namespace.clone(),
        ext.placement.service.clone(),
    );
    cp.kubectl(&[
        "delete",
        "rolebinding",
        "-n",
        "kube-system",
        &format!("{ns}-{svc}-auth-reader"),
    ]);
    ext.restart(&cp, |_| {});
    let exit = ext.daemon.wait_exit_within(SETTLE);
    assert!(
        exit.is_some(),
        "the extension kept running without its configmap:\n{}",
        ext.daemon.log_tail(20)
    );
    assert!(
        ext.daemon
            .log()
            .contains("extension-apiserver-authentication"),
        "{}",
        ext.daemon.log_tail(20)
    );
    wait_discovery_fails(&cp);
    (scan(&cp, &[]), on_apiservice("Aggregation"))
}
on_both!(auth_reader_removed);

/// Restart kube-apiserver with its proxy client certificate (`--proxy-client-cert-file`) and a
/// key, and (`discovery_fails`) wait until the aggregator's discovery requests fail.
fn restart_with_proxy_client(cp: &mut ControlPlane, pair: &KeyPairFiles, discovery_fails: bool) {
    let (cert, key) = (
        pair.cert.display().to_string(),
        pair.key.display().to_string(),
    );
    cp.restart_kube_apiserver(|flags| {
        ControlPlane::set_flag(flags, "proxy-client-cert-file", &cert);
        ControlPlane::set_flag(flags, "proxy-client-key-file", &key);
    });
    if discovery_fails {
        wait_discovery_fails(cp);
        // Settled, as an on-call finds it: 1.36's aggregator refuses to proxy (503 `service
        // unavailable`) as soon as its availability check failed, before the condition is
        // written; a scan in that moment sees Available=True and 503s, which is Aggregation's.
        cp.poll("the APIService turns unavailable", SETTLE, || {
            (apiservice_available(cp) == Some(false)).then_some(())
        });
    }
}

/// Front-proxy trust broken through kube-apiserver's flags: its proxy client certificate is
/// reissued under another name (`aggregator`) while `--requestheader-allowed-names` still says
/// `front-proxy-client`. The extension verifies the certificate against the front-proxy CA, finds
/// its CN not in the allowed names kube-apiserver publishes in
/// kube-system/extension-apiserver-authentication (`x509: subject with cn=aggregator is not in the
/// allowed list`), and treats every proxied request as anonymous: the availability check gets 403.
///
/// Restarting kube-apiserver with *other* allowed names alone does not break it: the trust
/// controller (`cluster_authentication_trust_controller.go`) unions the names it publishes with
/// those already in the ConfigMap, so the old name stays allowed — the real server proved that.
fn front_proxy_name_not_allowed(assets: &Assets) -> (Scan, Expect) {
    let mut cp = ControlPlane::start(assets, &[]);
    let _ext = Extension::start(&cp, placement("apis", "wardle-front"));
    let renamed = cp.pki.front_proxy_ca.issue(
        "front-proxy-renamed",
        &LeafSpec::client("aggregator", &[], valid_now()),
    );
    restart_with_proxy_client(&mut cp, &renamed, true);
    (scan(&cp, &[]), on_apiservice("Auth"))
}
on_both!(front_proxy_name_not_allowed);

/// kube-apiserver is restarted with an expired `--proxy-client-cert-file` (a rotation job that
/// did not run): the extension's request-header authenticator rejects the aggregator's client
/// certificate, so every proxied request is anonymous.
fn proxy_client_cert_expired(assets: &Assets) -> (Scan, Expect) {
    let mut cp = ControlPlane::start(assets, &[]);
    let _ext = Extension::start(&cp, placement("kube-ext", "wardle"));
    let expired = cp.pki.front_proxy_ca.issue(
        "front-proxy-client-expired",
        &LeafSpec::client(
            "front-proxy-client",
            &[],
            Validity::expired_at(jiff::Timestamp::now()),
        ),
    );
    restart_with_proxy_client(&mut cp, &expired, true);
    (scan(&cp, &[]), on_apiservice("Auth"))
}
on_both!(proxy_client_cert_expired);

/// A kubeconfig for kube-apiserver's authorization webhook pointing at a port nobody listens on.
fn unreachable_authz_webhook(dir: &Path) -> PathBuf {
    let [port] = crate::util::daemons::free_ports();
    let path = dir.join("authz-webhook.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: authz
  cluster:
    server: https://127.0.0.1:{port}/authorize
    insecure-skip-tls-verify: true
users:
- name: kube-apiserver
  user: {{}}
contexts:
- name: authz
  context: {{cluster: authz, user: kube-apiserver}}
current-context: authz
"
        ),
    )
    .unwrap();
    path
}

/// kube-apiserver authorizes with `RBAC,Webhook` and the webhook's server is gone (3f). RBAC
/// allows the scan's admin identity first, so the webhook is never asked for it; an ordinary
/// user's request that RBAC does not allow gets the webhook's failure.
fn authz_webhook_unreachable(assets: &Assets) -> Checks {
    let mut cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("wardle-webhook", "api"));
    let kubeconfig = unreachable_authz_webhook(cp.dir()).display().to_string();
    // `--authorization-mode` is a list flag: given twice it would name RBAC twice, which
    // kube-apiserver refuses. The operator edits the flag (a static Pod's manifest) instead.
    cp.restart_kube_apiserver(|flags| {
        ControlPlane::set_flag(flags, "authorization-mode", "RBAC,Webhook");
        ControlPlane::set_flag(flags, "authorization-webhook-config-file", &kubeconfig);
    });
    // A read RBAC does not allow alice: the webhook is asked, and fails.
    let path = format!("/api/v1/namespaces/{}/configmaps", ext.placement.namespace);
    let (code, body) = cp.raw_get_as_token(users::ALICE.1, &path);
    assert_eq!(code, 500, "{body}");
    let s = scan(&cp, &[]);
    // `why` of alice's LIST, as the on-call runs it (impersonating her and her group), and
    // what the on-call saves: her `kubectl get -v=6`, kube-apiserver's log, /metrics and readyz.
    let as_alice = ["--as", users::ALICE.0, "--as-group", "wardle-users"];
    let w = why(&cp, "LIST", &path, &as_alice);
    let mut incident = Incident::new();
    incident.kubectl(
        &cp,
        "kubectl-get-alice",
        &[
            &["get", "configmaps", "-n", &ext.placement.namespace, "-v=6"][..],
            &as_alice[..],
        ]
        .concat(),
    );
    incident.write("kube-apiserver-metrics", &cp.raw_get("/metrics").1);
    incident.write("readyz", &cp.raw_get("/readyz?verbose").1);
    incident.log("kube-apiserver", cp.kube_apiserver(), 2000);
    let a = analyze_raw(incident.path());
    let on_authorizer = || Expect::Problem {
        class: "Auth",
        kind: "APIServer",
        name: "kube-apiserver".into(),
        severity: "critical",
    };
    Checks::scan_why_raw(on_authorizer(), s, w, ("Auth", "critical"), a)
}
on_both!(authz_webhook_unreachable);

/// Invented from the extension's delegated authentication
/// (`k8s.io/apiserver/pkg/server/options/authentication.go`: `DelegatingAuthenticationOptions`
/// builds a union of the request-header authenticator and the x509 client-certificate
/// authenticator, in that order, from the two CAs kube-apiserver publishes in
/// kube-system/extension-apiserver-authentication) and the union authenticator
/// (`k8s.io/apiserver/pkg/authentication/request/union/union.go`, which drops an authenticator's
/// error when a later one succeeds). kube-apiserver's proxy client certificate is reissued by the
/// *cluster* CA instead of the front-proxy CA (one CA for everything, a common PKI-tool mistake):
/// the request-header authenticator rejects it (`x509: certificate signed by unknown authority`),
/// but the client-certificate authenticator accepts it — so the extension sees every proxied
/// request as the user `front-proxy-client` itself, not the user the aggregator proxies for, and
/// its delegated authorization refuses that user: the availability check gets 403 naming a user
/// nobody sent.
fn proxy_client_cert_from_cluster_ca(assets: &Assets) -> (Scan, Expect) {
    let mut cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("team-a", "wardle-ca"));
    let wrong_ca = cp.pki.cluster_ca.issue(
        "front-proxy-client-cluster-ca",
        &LeafSpec::client("front-proxy-client", &[], valid_now()),
    );
    restart_with_proxy_client(&mut cp, &wrong_ca, false);
    // Discovery stays readable (system:discovery is bound to every authenticated user, and
    // `front-proxy-client` is one): the availability check passes, every resource request fails.
    let path = flunders(&ext);
    let body = cp.poll(
        "the admin's list is refused as front-proxy-client",
        SETTLE,
        || {
            let (code, body) = cp.raw_get(&path);
            (code == 403 && body.contains("front-proxy-client")).then_some(body)
        },
    );
    assert!(body.contains("cannot list resource"), "{body}");
    (scan(&cp, &[]), on_apiservice("Auth"))
}
on_both!(proxy_client_cert_from_cluster_ca);
