//! Admission: webhooks and CRD conversion webhooks served by the test's own [`Backend`], broken by
//! different mechanisms while clients keep writing (or reading), so the scan's metrics window sees
//! the calls: a validating webhook's backend refuses, a mutating one stalls past `timeoutSeconds`, one
//! answers 500, a CRD's converter is gone, and — invented from apiextensions-apiserver's
//! `webhook_converter.go` (`restoreObjectMeta`) — a converter that answers `Success` but writes a
//! label kube-apiserver rejects. Then the defect classes of issue 22 this area owns: a converter
//! slower than the window (3g), decisive and undecided verdicts without a window (3h), answers that
//! break the request (3k), a working webhook's policy denial (3l), and the incident folders an
//! on-call saves, read by `analyze --raw` (3d, 3k, 3l). Webhooks are scoped to a labelled namespace
//! so the control plane's own writes pass; names and namespaces differ from case to case.

use std::time::Duration;

use base64::Engine;

use super::{
    Checks, Expect, SETTLE, Scan, analyze_raw, assert_raw_read_all, assert_why_reads_right,
    on_both, scan, why, why_human, why_write,
};
use crate::util::k8s::backend::{Answer, Backend};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::traffic::{Call, Traffic};
use crate::util::k8s::{Assets, ControlPlane};

/// Where kube-apiserver sends a webhook's reviews.
pub(super) enum Client {
    /// `clientConfig.url`: the backend's own address.
    Url { port: u16 },
    /// `clientConfig.service`: an ExternalName Service `namespace/name` pointing at `localhost`
    /// and the backend's port (kube-apiserver resolves it as the aggregator does, and verifies the
    /// certificate for `name.namespace.svc`).
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
}

impl Client {
    pub(super) fn url(backend: &Backend) -> Self {
        Client::Url { port: backend.port }
    }

    pub(super) fn service(backend: &Backend, namespace: &str, name: &str) -> Self {
        Client::Service {
            namespace: namespace.into(),
            name: name.into(),
            port: backend.port,
        }
    }

    fn yaml(&self, ca: &str, path: &str) -> String {
        let path = path.trim_start_matches('/');
        match self {
            Client::Url { port } => {
                format!("{{url: \"https://127.0.0.1:{port}/{path}\", caBundle: {ca}}}")
            }
            Client::Service {
                namespace,
                name,
                port,
            } => format!(
                "{{service: {{namespace: {namespace}, name: {name}, port: {port}, path: \"/{path}\"}}, caBundle: {ca}}}"
            ),
        }
    }

    /// The ExternalName Service a service reference needs (nothing for a URL).
    fn service_yaml(&self) -> String {
        match self {
            Client::Url { .. } => String::new(),
            Client::Service {
                namespace,
                name,
                port,
            } => format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{type: ExternalName, externalName: localhost, ports: [{{name: https, port: {port}}}]}}\n---\n"
            ),
        }
    }
}

/// One admission webhook in a configuration of its own, guarding ConfigMap creates in the
/// namespaces labelled `guard: <label>`.
pub(super) struct Hook<'a> {
    pub(super) mutating: bool,
    pub(super) configuration: &'a str,
    pub(super) name: &'a str,
    pub(super) label: &'a str,
    pub(super) client: Client,
    pub(super) failure_policy: &'a str,
    pub(super) timeout_seconds: u32,
}

impl Hook<'_> {
    pub(super) fn kind(&self) -> &'static str {
        if self.mutating {
            "MutatingWebhook"
        } else {
            "ValidatingWebhook"
        }
    }

    fn yaml(&self, cp: &ControlPlane) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(cp.pki.backends_ca.pem());
        let configuration_kind = if self.mutating {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        format!(
            r#"{service}apiVersion: admissionregistration.k8s.io/v1
kind: {configuration_kind}
metadata: {{name: {configuration}}}
webhooks:
- name: {name}
  clientConfig: {client}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{guard: {label}}}}}
  failurePolicy: {failure}
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: {timeout}
"#,
            service = self.client.service_yaml(),
            configuration = self.configuration,
            name = self.name,
            client = self.client.yaml(&ca, "review"),
            label = self.label,
            failure = self.failure_policy,
            timeout = self.timeout_seconds,
        )
    }

    /// A working webhook denying by policy: OutOfScope on it (working as configured).
    fn denied(&self) -> Expect {
        Expect::Problem {
            class: "OutOfScope",
            kind: self.kind(),
            name: self.name.into(),
            severity: "warning",
        }
    }

    /// What a scan should blame: this webhook, critical under `Fail`.
    pub(super) fn blamed(&self, severity: &'static str) -> Expect {
        Expect::Problem {
            class: "Admission",
            kind: self.kind(),
            name: self.name.into(),
            severity,
        }
    }
}

/// A namespace whose ConfigMap creates `label`'s webhooks guard.
pub(super) fn guarded_namespace(cp: &ControlPlane, namespace: &str, label: &str) {
    cp.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}, labels: {{guard: {label}}}}}\n"
    ));
}

/// Clients creating ConfigMaps in `namespace`.
pub(super) fn configmap_creates(cp: &ControlPlane, namespace: &str) -> Traffic {
    Traffic::start(
        cp,
        vec![Call::post(
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c-{n}"},"data":{"k":"v"}}"#,
        )],
        2,
        Duration::from_millis(100),
    )
}

/// Install `hook` and wait until a create through it succeeds (the backend works).
pub(super) fn install(cp: &ControlPlane, hook: &Hook, backend: &Backend, traffic: &Traffic) {
    cp.apply(&hook.yaml(cp));
    cp.poll("a create through the webhook succeeds", SETTLE, || {
        (traffic.count(201) > 0 && backend.calls() > 0).then_some(())
    });
}

/// `hook` guarding `namespace` (its label on the namespace), clients creating ConfigMaps there,
/// and the hook installed and working: the clients' traffic, still running.
pub(super) fn guarded_creates(
    cp: &ControlPlane,
    hook: &Hook,
    backend: &Backend,
    namespace: &str,
) -> Traffic {
    guarded_namespace(cp, namespace, hook.label);
    let traffic = configmap_creates(cp, namespace);
    install(cp, hook, backend, &traffic);
    traffic
}

/// Wait until a few more requests than now fail with `status`.
fn wait_failing(cp: &ControlPlane, traffic: &Traffic, status: u16) {
    let before = traffic.count(status);
    let failing = crate::util::k8s::control_plane::poll("", SETTLE, &mut || {
        (traffic.count(status) > before + 2).then_some(())
    });
    assert!(
        failing.is_some(),
        "requests fail with {status}: not within {SETTLE:?}; answers {:?}\nkube-apiserver log tail:\n{}",
        traffic.seen(),
        cp.kube_apiserver().log_tail(30)
    );
}

/// A validating webhook with `failurePolicy: Fail` whose backend is stopped: every dial is
/// refused and every create in its namespaces fails. Also judged by `why` of a client's create
/// (a server-side dry run: admission runs, nothing is stored) and by `analyze --raw` of what the
/// on-call engineer saved.
fn validating_backend_refuses(assets: &Assets) -> Checks {
    let (cp, _backend, hook, _traffic) = refused_validating(assets);
    let s = scan(&cp, &[]);
    let object = configmap("team-a", "release-notes");
    let w = why_write(&cp, &object, &[]);
    assert_why_human(&cp, &object, &hook);
    let incident = client_create_incident(&cp, "team-a", "release-notes");
    vec![
        (s, hook.blamed("critical")),
        (
            w,
            Expect::Request {
                class: "Admission",
                severity: "critical",
            },
        ),
        (raw_read_all(&incident), hook.blamed("critical")),
    ]
    .into()
}

/// `analyze --raw` of `incident`, which must read all of it ([`assert_raw_read_all`]).
fn raw_read_all(incident: &Incident) -> Scan {
    let a = analyze_raw(incident.path());
    assert_raw_read_all(&a);
    a
}

/// A ConfigMap `name` in `namespace`, as a client's manifest.
fn configmap(namespace: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}}}\ndata: {{k: v}}\n"
    )
}

/// What an on-call engineer saves when a client's ConfigMap creates in `namespace` fail: the
/// usual objects and dumps, the client's `kubectl create -v=6` (its round trips and its error),
/// `curl` of the same POST with the `-w` trailer, and kube-apiserver's log tail.
fn client_create_incident(cp: &ControlPlane, namespace: &str, name: &str) -> Incident {
    let mut incident = Incident::new();
    incident.usual(cp);
    incident.kubectl(
        cp,
        "kubectl-create",
        &[
            "create",
            "configmap",
            name,
            "-n",
            namespace,
            "--from-literal=k=v",
            "-v=6",
        ],
    );
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-curl"}},"data":{{"k":"v"}}}}"#
    );
    incident.curl_apiserver(
        cp,
        "curl-create",
        &format!("/api/v1/namespaces/{namespace}/configmaps"),
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            &body,
        ],
    );
    incident.log("kube-apiserver-log", cp.kube_apiserver(), 200);
    incident
}

/// `why`'s human view of the dry-run create of `object`: exit 1 for a critical verdict, reading
/// right (see [`assert_why_reads_right`]) and naming the webhook.
fn assert_why_human(cp: &ControlPlane, object: &str, hook: &Hook) {
    let (code, text) = why_human(cp, Some(object), &[]);
    assert_eq!(code, 1, "a critical verdict exits 1:\n{text}");
    assert_why_reads_right(&text, "Admission", &[hook.name]);
}
on_both!(validating_backend_refuses);

/// Case 1's fault: a validating URL webhook (`Fail`) whose stopped backend refuses, after creates
/// through it failed.
fn refused_validating(assets: &Assets) -> (ControlPlane, Backend, Hook<'static>, Traffic) {
    let cp = ControlPlane::start(assets, &[]);
    let mut backend = Backend::start(&cp.pki.backends_ca, "policy-backend", &[]);
    let hook = Hook {
        mutating: false,
        configuration: "tenant-policy",
        name: "labels.policy.example.com",
        label: "tenant-a",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "team-a");
    backend.stop();
    wait_failing(&cp, &traffic, 500);
    (cp, backend, hook, traffic)
}

/// A mutating webhook, called through its Service, whose backend stalls past `timeoutSeconds`:
/// every call is cut off by the dispatcher's deadline. Also judged by `why` of a client's create
/// and by `analyze --raw` of the on-call's folder.
fn mutating_backend_stalls(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(
        &cp.pki.backends_ca,
        "injector",
        &["sidecar-injector.mesh-system.svc"],
    );
    let hook = Hook {
        mutating: true,
        configuration: "mesh-injection",
        name: "inject.mesh.example.io",
        label: "meshed",
        client: Client::service(&backend, "mesh-system", "sidecar-injector"),
        failure_policy: "Fail",
        timeout_seconds: 2,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "shop");
    backend.answer(Answer::Stall(Duration::from_secs(8)));
    wait_failing(&cp, &traffic, 500);
    let s = scan(&cp, &[]);
    let object = configmap("shop", "cart-settings");
    let w = why_write(&cp, &object, &[]);
    assert_why_human(&cp, &object, &hook);
    let incident = client_create_incident(&cp, "shop", "cart-settings");
    vec![
        (s, hook.blamed("critical")),
        (
            w,
            Expect::Request {
                class: "Admission",
                severity: "critical",
            },
        ),
        (raw_read_all(&incident), hook.blamed("critical")),
    ]
    .into()
}
on_both!(mutating_backend_stalls);

/// A validating webhook (through its Service) whose backend answers every review with HTTP 500
/// (its own dependency is down).
fn validating_answers_500(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(
        &cp.pki.backends_ca,
        "quota",
        &["quota-webhook.billing-system.svc"],
    );
    let hook = Hook {
        mutating: false,
        configuration: "billing-quota",
        name: "quota.billing.example.net",
        label: "billed",
        client: Client::service(&backend, "billing-system", "quota-webhook"),
        failure_policy: "Fail",
        timeout_seconds: 10,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "invoices");
    backend.answer(Answer::Status(500));
    wait_failing(&cp, &traffic, 500);
    (scan(&cp, &[]), hook.blamed("critical"))
}
on_both!(validating_answers_500);

/// A CRD served in two versions, stored in `v1`, converted to `v2` by a webhook.
pub(super) struct Crd {
    pub(super) group: &'static str,
    pub(super) plural: &'static str,
    pub(super) kind: &'static str,
    pub(super) namespace: &'static str,
}

impl Crd {
    pub(super) fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    pub(super) fn path(&self, version: &str) -> String {
        format!(
            "/apis/{}/{version}/namespaces/{}/{}",
            self.group, self.namespace, self.plural
        )
    }

    /// Install it with its conversion webhook at `client`, create `objects` objects in the
    /// storage version, and wait until a read of the other version converts them.
    pub(super) fn install(
        &self,
        cp: &ControlPlane,
        client: &Client,
        backend: &Backend,
        objects: usize,
    ) {
        let ca = base64::engine::general_purpose::STANDARD.encode(cp.pki.backends_ca.pem());
        let (group, plural, kind) = (self.group, self.plural, self.kind);
        let singular = kind.to_lowercase();
        cp.apply(&format!(
            r#"{service}apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}, listKind: {kind}List}}
  versions:
  - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}
  - {{name: v2, served: true, storage: false, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {client}
"#,
            service = client.service_yaml(),
            ns = self.namespace,
            client = client.yaml(&ca, "convert"),
        ));
        let v1 = self.path("v1");
        cp.poll("the CRD is served", SETTLE, || {
            (cp.raw_get(&v1).0 == 200).then_some(())
        });
        let objects: String = (0..objects)
            .map(|i| {
                format!(
                    "apiVersion: {group}/v1\nkind: {kind}\nmetadata: {{name: item-{i}, namespace: {ns}}}\nspec: {{size: {i}}}\n---\n",
                    ns = self.namespace
                )
            })
            .collect();
        cp.apply(&objects);
        let v2 = format!("{}/item-0", self.path("v2"));
        cp.poll("a read of v2 converts through the webhook", SETTLE, || {
            (cp.raw_get(&v2).0 == 200 && backend.calls() > 0).then_some(())
        });
    }

    /// Clients reading the objects in the other version, as controllers do (every answer needs
    /// the converter: a 1.3x kube-apiserver serves lists of it from a watch cache converted when
    /// it filled, but a GET converts every time).
    pub(super) fn readers(&self, cp: &ControlPlane, objects: usize) -> Traffic {
        let calls = (0..objects)
            .map(|i| Call::get(&format!("{}/item-{i}", self.path("v2"))))
            .collect();
        Traffic::start(cp, calls, 2, Duration::from_millis(100))
    }

    /// What a scan should blame: this CRD (its conversion webhook).
    pub(super) fn blamed(&self, severity: &'static str) -> Expect {
        Expect::Problem {
            class: "Admission",
            kind: "CustomResourceDefinition",
            name: self.name(),
            severity,
        }
    }
}

/// A CRD's conversion webhook backend (through its Service) is stopped: every read of the
/// non-storage version fails. Also judged by `why` of a controller's read of that version and by
/// `analyze --raw` of the on-call's folder.
fn conversion_backend_refuses(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let mut backend = Backend::start(
        &cp.pki.backends_ca,
        "converter",
        &["gadget-converter.gadgets-system.svc"],
    );
    let crd = Crd {
        group: "widgets.example.org",
        plural: "gadgets",
        kind: "Gadget",
        namespace: "workshop",
    };
    let client = Client::service(&backend, "gadgets-system", "gadget-converter");
    crd.install(&cp, &client, &backend, 3);
    let traffic = crd.readers(&cp, 3);
    backend.stop();
    wait_failing(&cp, &traffic, 500);
    let s = scan(&cp, &[]);
    // A controller's read of the converted version: `why` of it, and what the on-call saves.
    let object = format!("{}/item-1", crd.path("v2"));
    let w = why(&cp, "GET", &object, &[]);
    let (code, text) = why_human(&cp, None, &["GET", &object]);
    assert_eq!(code, 1, "a critical verdict exits 1:\n{text}");
    assert_why_reads_right(&text, "Admission", &[&crd.name()]);
    let mut incident = Incident::new();
    incident.usual(&cp);
    incident.kubectl(
        &cp,
        "kubectl-get",
        &[
            "get",
            &format!("{}.v2.{}", crd.plural, crd.group),
            "-n",
            crd.namespace,
            "item-1",
            "-v=6",
        ],
    );
    incident.curl_apiserver(&cp, "curl-get", &object, &[]);
    incident.log("kube-apiserver-log", cp.kube_apiserver(), 200);
    vec![
        (s, crd.blamed("critical")),
        (
            w,
            Expect::Request {
                class: "Admission",
                severity: "critical",
            },
        ),
        (raw_read_all(&incident), crd.blamed("critical")),
    ]
    .into()
}
on_both!(conversion_backend_refuses);

/// Invented from apiextensions-apiserver's `webhook_converter.go` (`restoreObjectMeta`): a
/// converter may change only labels and annotations, and kube-apiserver validates the ones it
/// changed. A converter that copies a field into a label whose value is not a valid label value
/// answers 200 `Success` quickly over good TLS, and still every read of the converted version
/// fails (`conversion webhook for … returned invalid metadata …`).
fn conversion_writes_invalid_label(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "route-converter", &[]);
    let crd = Crd {
        group: "net.example.com",
        plural: "routes",
        kind: "Route",
        namespace: "edge",
    };
    crd.install(&cp, &Client::url(&backend), &backend, 2);
    let traffic = crd.readers(&cp, 2);
    backend.answer(Answer::ConvertWithLabel {
        key: "net.example.com/upstream".into(),
        value: "10.0.0.1:8080 (primary)".into(),
    });
    wait_failing(&cp, &traffic, 500);
    (scan(&cp, &[]), crd.blamed("critical"))
}
on_both!(conversion_writes_invalid_label);

/// 3g: a conversion webhook slower than the metrics window. Nobody's read finishes while the
/// scan watches — the converter stalls past kube-apiserver's 30 s conversion timeout — so no
/// metric moves; only the scan's own read of the non-storage version meets it.
fn conversion_slower_than_window(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(
        &cp.pki.backends_ca,
        "ledger-converter",
        &["ledger-conversion.finance.svc"],
    );
    let crd = Crd {
        group: "ledger.example.io",
        plural: "entries",
        kind: "Entry",
        namespace: "accounts",
    };
    let client = Client::service(&backend, "finance", "ledger-conversion");
    crd.install(&cp, &client, &backend, 2);
    backend.answer(Answer::Stall(Duration::from_secs(300)));
    (scan(&cp, &[]), crd.blamed("critical"))
}
on_both!(conversion_slower_than_window);

/// 3h: decisive without a window. With `--window 0` there is one scrape, so no counter can
/// decide anything, and here no client has even tried the webhook yet (it was just rolled out, its
/// backend never came up): the scan's own dial of the backend, through the webhook's Service, was
/// refused — enough for critical and exit 1.
fn refused_without_window(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let mut backend = Backend::start(
        &cp.pki.backends_ca,
        "audit-backend",
        &["audit-hook.compliance.svc"],
    );
    backend.stop();
    let hook = Hook {
        mutating: false,
        configuration: "compliance-audit",
        name: "audit.compliance.example.com",
        label: "audited",
        client: Client::service(&backend, "compliance", "audit-hook"),
        failure_policy: "Fail",
        timeout_seconds: 10,
    };
    guarded_namespace(&cp, "records", hook.label);
    cp.apply(&hook.yaml(&cp));
    let s = scan(&cp, &["--window", "0"]);
    assert_eq!(
        s.code,
        1,
        "a Fail webhook refusing the scan's dial decides exit 1 without a window:\n{}",
        s.describe()
    );
    (s, hook.blamed("critical"))
}
on_both!(refused_without_window);

/// 3h, the other half: a webhook whose backend is up (the scan's dial and handshake succeed) and
/// answers 500. With `--window 0` only the cumulative counter of one scrape says calls failed —
/// history, which cannot decide. The verdict stays undecided, and names the scan that would decide
/// it: the same cluster with a window.
fn answers_500_without_window(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "catalog", &[]);
    let hook = Hook {
        mutating: false,
        configuration: "catalog-rules",
        name: "sku.catalog.example.com",
        label: "catalogued",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "catalog");
    backend.answer(Answer::Status(500));
    wait_failing(&cp, &traffic, 500);
    drop(traffic);
    let s = scan(&cp, &["--window", "0"]);
    (
        s,
        Expect::Undecided {
            kind: hook.kind(),
            name: hook.name.into(),
            next: "--window",
        },
    )
}
on_both!(answers_500_without_window);

/// 3k: a mutating webhook whose JSONPatch makes the object invalid. The client's error is a 422
/// from the object's own validation and names no webhook; the webhook's calls succeed.
fn mutating_patch_makes_object_invalid(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "labeler", &[]);
    let hook = Hook {
        mutating: true,
        configuration: "cost-labels",
        name: "cost-center.labels.example.com",
        label: "costed",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "analytics");
    backend.answer(Answer::Patch(serde_json::json!([
        {"op": "add", "path": "/metadata/labels", "value": {"cost-center": "team a / b"}}
    ])));
    wait_failing(&cp, &traffic, 422);
    (scan(&cp, &[]), hook.blamed("critical"))
}
on_both!(mutating_patch_makes_object_invalid);

/// 3k: a mutating webhook whose JSONPatch cannot be applied (it replaces a field the object does
/// not have): kube-apiserver fails the request with a 500 that names no webhook.
fn mutating_patch_does_not_apply(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "scaler", &["defaults.autoscale.svc"]);
    let hook = Hook {
        mutating: true,
        configuration: "replica-defaults",
        name: "replicas.defaults.example.dev",
        label: "scaled",
        client: Client::service(&backend, "autoscale", "defaults"),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "batch-jobs");
    backend.answer(Answer::Patch(serde_json::json!([
        {"op": "replace", "path": "/spec/replicas", "value": 3}
    ])));
    wait_failing(&cp, &traffic, 500);
    (scan(&cp, &[]), hook.blamed("critical"))
}
on_both!(mutating_patch_does_not_apply);

/// 3l: a working webhook denies by policy. Not Healthy (requests fail), not a failure of the
/// path (the webhook answered, as configured): OutOfScope naming the webhook — and, from the
/// scan's own dry-run create (`--probe-admission`), its message.
fn validating_denies_by_policy(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "owners", &[]);
    let hook = Hook {
        mutating: false,
        configuration: "ownership",
        name: "owner-label.governance.example.com",
        label: "governed",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "payments");
    let message = "every ConfigMap in this namespace needs an owner label";
    backend.answer(Answer::Deny(message.into()));
    wait_failing(&cp, &traffic, 403);
    let s = scan(&cp, &["--probe-admission"]);
    let named = s.diagnosis["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| {
            v["subject"]["name"] == hook.name
                && v["summary"].as_str().is_some_and(|t| t.contains(message))
        });
    assert!(
        named,
        "the verdict on {} names its message {message:?}:\n{}",
        hook.name,
        s.describe()
    );
    (s, hook.denied())
}
on_both!(validating_denies_by_policy);

/// 3d: offline evidence of a refused dial. The folder holds the webhook configurations, the
/// API server's /metrics and a `curl -v` to the webhook's backend address that was refused — no
/// client error naming the webhook: the refused dial to its address is the evidence.
fn raw_curl_refused(assets: &Assets) -> (Scan, Expect) {
    let (cp, backend, hook, _traffic) = refused_validating(assets);
    let mut incident = Incident::new();
    incident.kubectl(
        &cp,
        "webhooks",
        &["get", "validatingwebhookconfigurations", "-o", "json"],
    );
    incident.kubectl(&cp, "metrics", &["get", "--raw", "/metrics"]);
    incident.curl("curl-backend", &[backend.url("/")]);
    (analyze_raw(incident.path()), hook.blamed("critical"))
}
on_both!(raw_curl_refused);

/// 3k from the client's side: the 422 a client got from a mutating webhook's invalid patch, with
/// the webhook configurations and /metrics — the error names no webhook; which mutating webhook
/// matched the request, and its calls, do.
fn raw_patch_makes_object_invalid(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "stamper", &[]);
    let hook = Hook {
        mutating: true,
        configuration: "release-stamps",
        name: "stamp.release.example.org",
        label: "stamped",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "releases");
    backend.answer(Answer::Patch(serde_json::json!([
        {"op": "add", "path": "/metadata/labels", "value": {"release": "v1.2 (final)"}}
    ])));
    wait_failing(&cp, &traffic, 422);
    let mut incident = Incident::new();
    incident.kubectl(
        &cp,
        "client-create",
        &[
            "create",
            "configmap",
            "settings",
            "-n",
            "releases",
            "--from-literal=mode=fast",
        ],
    );
    incident.kubectl(
        &cp,
        "mutating",
        &["get", "mutatingwebhookconfigurations", "-o", "json"],
    );
    incident.kubectl(&cp, "namespaces", &["get", "namespaces", "-o", "json"]);
    incident.kubectl(&cp, "metrics", &["get", "--raw", "/metrics"]);
    // A warning, not critical: one dump of /metrics is history, so what ties the 422 to the
    // webhook is only that it is the one mutating webhook on that write (a scan's window decides
    // more: `mutating_patch_makes_object_invalid`).
    (analyze_raw(incident.path()), hook.blamed("warning"))
}
on_both!(raw_patch_makes_object_invalid);

/// 3l from the client's side: the denial a client got, with the configurations: OutOfScope on
/// the webhook, naming its message.
fn raw_denied_by_policy(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let backend = Backend::start(&cp.pki.backends_ca, "images", &[]);
    let hook = Hook {
        mutating: false,
        configuration: "image-policy",
        name: "registry.images.example.com",
        label: "prod",
        client: Client::url(&backend),
        failure_policy: "Fail",
        timeout_seconds: 5,
    };
    let traffic = guarded_creates(&cp, &hook, &backend, "storefront");
    let message = "configuration must come from the approved registry";
    backend.answer(Answer::Deny(message.into()));
    wait_failing(&cp, &traffic, 403);
    let mut incident = Incident::new();
    incident.kubectl(
        &cp,
        "client-create",
        &[
            "create",
            "configmap",
            "banner",
            "-n",
            "storefront",
            "--from-literal=text=hello",
        ],
    );
    incident.kubectl(
        &cp,
        "validating",
        &["get", "validatingwebhookconfigurations", "-o", "json"],
    );
    incident.kubectl(&cp, "metrics", &["get", "--raw", "/metrics"]);
    let a = analyze_raw(incident.path());
    let named = a.diagnosis["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| {
            v["subject"]["name"] == hook.name
                && v["summary"].as_str().is_some_and(|t| t.contains(message))
        });
    assert!(
        named,
        "the verdict on {} names its message {message:?}:\n{}",
        hook.name,
        a.describe()
    );
    (a, hook.denied())
}
on_both!(raw_denied_by_policy);
