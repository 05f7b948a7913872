//! OutOfScope: failures that are not any layer of the API server's — a user refused by RBAC as
//! configured, the extension server's own storage failing while the aggregated path works — and
//! an on-call's own probe that says nothing about the path (3m).

use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::{Checks, Expect, SETTLE, Scan, analyze_raw, on_both, scan, why};
use crate::util::k8s::control_plane::plain_client;
use crate::util::k8s::extension::{APISERVICE, Extension, GROUP_VERSION, Placement};
use crate::util::k8s::pki::users;
use crate::util::k8s::traffic::{Call, Traffic};
use crate::util::k8s::{Assets, ControlPlane, RUNTIME};

fn placement(namespace: &str, service: &str) -> Placement {
    Placement {
        namespace: namespace.into(),
        service: service.into(),
    }
}

fn on_apiservice() -> Expect {
    Expect::Problem {
        class: "OutOfScope",
        kind: "APIService",
        name: APISERVICE.into(),
        severity: "warning",
    }
}

/// 3e: a failure the extension server owns is explained, on its APIService and on every request
/// it failed — no verdict may say that no rule explains it.
fn nothing_inconclusive(s: Scan) -> Scan {
    let inconclusive: Vec<String> = s.diagnosis["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["class"] == "Inconclusive")
        .map(|v| format!("{}: {}", v["subject"]["name"], v["summary"]))
        .collect();
    assert!(
        inconclusive.is_empty(),
        "Inconclusive where the extension owns the failure: {inconclusive:?}\n{}",
        s.describe()
    );
    s
}

fn flunders(ext: &Extension) -> String {
    format!(
        "/apis/{GROUP_VERSION}/namespaces/{}/flunders",
        ext.placement.namespace
    )
}

/// An ordinary user without RBAC on the aggregated resource (its binding deleted): kube-apiserver
/// refuses it with 403 before proxying, as configured (captures 08d). A scan of the cluster while
/// that user keeps trying finds every layer working: nothing to blame, nothing to fix but the
/// user's own RBAC if the user needs it.
fn user_without_rbac(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("apps-api", "wardle"));
    let (ns, svc) = (&ext.placement.namespace, &ext.placement.service);
    cp.kubectl(&["delete", "clusterrolebinding", &format!("{ns}:{svc}:users")]);
    let path = flunders(&ext);
    let body = cp.poll("alice is refused by RBAC", SETTLE, || {
        let (code, body) = cp.raw_get_as_token(users::ALICE.1, &path);
        (code == 403).then_some(body)
    });
    assert!(body.contains("cannot list resource"), "{body}");
    let traffic = Traffic::start(
        &cp,
        vec![Call::get(&path).by_user(users::ALICE.1)],
        2,
        Duration::from_millis(50),
    );
    let s = scan(&cp, &[]);
    assert!(traffic.count(403) > 0, "{:?}", traffic.seen());
    (s, Expect::Healthy)
}
on_both!(user_without_rbac);

/// etcd's v3 HTTP/JSON gateway: POST `path` with `body`.
fn etcd_gateway(url: &str, path: &str, body: Value) -> Value {
    let http = plain_client();
    let url = format!("{url}{path}");
    RUNTIME.block_on(async {
        let r = http.post(&url).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        r.json().await.unwrap()
    })
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Overwrite every key of the extension's etcd whose name contains `needle` with bytes no
/// decoder reads (a disk corruption, a bad migration, a writer of another version).
fn corrupt_extension_keys(ext: &Extension, needle: &str) -> usize {
    let url = ext.etcd.url();
    let all = etcd_gateway(
        &url,
        "/v3/kv/range",
        json!({"key": b64(b"\0"), "range_end": b64(b"\0"), "keys_only": true}),
    );
    let mut n = 0;
    for kv in all["kvs"].as_array().into_iter().flatten() {
        let key = kv["key"].as_str().unwrap_or_default();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(key)
            .unwrap_or_default();
        if String::from_utf8_lossy(&raw).contains(needle) {
            etcd_gateway(
                &url,
                "/v3/kv/put",
                json!({"key": key, "value": b64(b"\x00\x01not an object\xff")}),
            );
            n += 1;
        }
    }
    n
}

/// The extension server's own internal error (3e): one object of the resource its users use (the
/// namespaced `flunders`, not the first resource of its discovery document) no longer decodes in
/// its own etcd, so every list and get of that resource answers 500 while its readyz, its
/// discovery and the aggregator are fine. The owner is the extension's storage: OutOfScope on its
/// APIService, and the failing request is explained by it, never Inconclusive.
fn extension_storage_undecodable(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("wardle-data", "storage-api"));
    let ns = &ext.placement.namespace;
    cp.apply(&format!(
        "apiVersion: {GROUP_VERSION}\nkind: Flunder\nmetadata: {{name: corrupted-flunder, namespace: {ns}}}\n"
    ));
    assert_eq!(corrupt_extension_keys(&ext, "corrupted-flunder"), 1);
    let path = flunders(&ext);
    cp.poll("the extension's list fails", SETTLE, || {
        (cp.raw_get(&path).0 >= 500).then_some(())
    });
    let s = nothing_inconclusive(scan(&cp, &[]));
    // `why` of a user's LIST that failed: the extension's own storage, not a layer of the path.
    let w = nothing_inconclusive(why(&cp, "LIST", &path, &[]));
    vec![
        (s, on_apiservice()),
        (
            w,
            Expect::Request {
                class: "OutOfScope",
                severity: "warning",
            },
        ),
    ]
    .into()
}
on_both!(extension_storage_undecodable);

/// Invented from the generic apiserver's storage options and kube-aggregator's availability
/// controller: the extension registers its own etcd as a readyz check (`etcd`, in
/// `k8s.io/apiserver/pkg/server/options/etcd.go`), but the aggregator only asks for its discovery
/// document (`available_controller.go`), which it serves from memory. With the extension's etcd
/// killed, the APIService stays Available and discovery answers while every list and get of its
/// resources fails in its storage.
fn extension_etcd_killed(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let mut ext = Extension::start(&cp, placement("wardle-store", "wardle"));
    ext.etcd.daemon.signal("KILL");
    let _ = ext.etcd.daemon.wait_exit();
    let path = flunders(&ext);
    // No answer within the client's timeout (0), or the extension's own 5xx.
    cp.poll("the extension's list fails", SETTLE, || {
        let code = cp.raw_get(&path).0;
        (code == 0 || code >= 500).then_some(())
    });
    assert_eq!(cp.raw_get(&format!("/apis/{GROUP_VERSION}")).0, 200);
    (nothing_inconclusive(scan(&cp, &[])), on_apiservice())
}
on_both!(extension_etcd_killed);

/// `curl -k -sS -v ARGS` as an on-call runs it from a shell, stdout and stderr in one file.
fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-k", "-sS", "-v", "--max-time", "10"])
        .args(args)
        .args(["-w", "\nHTTP %{http_code} time_total=%{time_total}\n"])
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .output()
        .expect("curl is on PATH");
    let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    text
}

/// Whose probe is it (3m)? The aggregated path is healthy; the on-call also curled the extension
/// server directly, without credentials (anonymous: 403) and with a stale token (401) — answers
/// the extension gives by design to anyone but the aggregator's front proxy. Next to the healthy
/// aggregated evidence (APIService Available, discovery and a list through kube-apiserver served)
/// they say nothing about the path's authentication: no Auth verdict.
fn direct_curl_without_credentials(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let ext = Extension::start(&cp, placement("observability", "wardle-direct"));
    let dir = tempfile::Builder::new()
        .prefix("extpath-incident-")
        .tempdir()
        .unwrap();
    let save = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    // `kubectl … > file 2>&1`, as an on-call saves it (klog lines and output interleaved).
    let kubectl = |args: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "kubectl --kubeconfig {} {args} 2>&1",
                cp.kubeconfig.display()
            ))
            .env_remove("KUBECONFIG")
            .env("HOME", cp.dir())
            .output()
            .expect("sh and kubectl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    save("apiservices.json", &kubectl("get apiservices -o json"));
    save(
        "services.json",
        &kubectl("get services,endpoints -A -o json"),
    );
    save(
        "discovery-v6.txt",
        &kubectl(&format!("get --raw /apis/{GROUP_VERSION} -v=6")),
    );
    save(
        "get-flunders-v6.txt",
        &kubectl(&format!("get flunders -n {} -v=6", ext.placement.namespace)),
    );
    save("apiserver-metrics.txt", &cp.raw_get("/metrics").1);
    // Straight to the extension server's port (its Pod, a port-forward), as an on-call does.
    let direct = format!("https://127.0.0.1:{}/apis/{GROUP_VERSION}", ext.port);
    let anonymous = curl(&[&direct]);
    assert!(anonymous.contains("system:anonymous"), "{anonymous}");
    save("curl-backend-anonymous.txt", &anonymous);
    let stale = curl(&["-H", "Authorization: Bearer expired-token", &direct]);
    assert!(stale.contains("HTTP 401"), "{stale}");
    save("curl-backend-token.txt", &stale);
    let s = analyze_raw(dir.path());
    if std::env::var_os("EXTPATH_KEEP_INCIDENTS").is_some() {
        eprintln!("incident folder kept: {}", dir.keep().display());
    }
    (s, Expect::Healthy)
}
on_both!(direct_curl_without_credentials);
