//! What kube-apiserver's built-in controllers and defaulting would do to objects, done
//! synchronously after each write so tests never wait for a reconcile loop.
//!
//! Owned here: defaulting on create (Service ClusterIP allocation and port defaults, Namespace phase,
//! CRD `Established`, Local APIService availability); EndpointSlice mirroring from Endpoints (one
//! slice per subset, labelled like the mirroring controller); Local APIServices for built-in and CRD
//! group/versions (the autoregistration controller); loading the scenario's objects at start. Not
//! owned: the remote APIService availability controller, which probes backends (`aggregator`).

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use super::registry::{self, BUILTIN_GROUP_VERSIONS, ResourceDef};
use super::state::State;
use super::store::{Key, StoreError};

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Key of an object of `def`.
pub fn key_of(def: &ResourceDef, obj: &Value) -> Key {
    let ns = if def.namespaced {
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
    } else {
        ""
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Key::new(&def.group, &def.resource, ns, name)
}

/// Defaulting on create.
pub fn default_on_create(state: &State, def: &ResourceDef, obj: &mut Value) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Service") => {
            if obj.pointer("/spec/type").is_none() {
                obj["spec"]["type"] = json!("ClusterIP");
            }
            let external =
                obj.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
            if !external && obj.pointer("/spec/clusterIP").is_none() {
                // Inside kubeadm's default service CIDR 10.96.0.0/12, so addresses look like a
                // real cluster's in messages (`dial tcp 10.96.0.12:443: …`); the offset keeps
                // clear of 10.96.0.1, which a real cluster gives the `kubernetes` Service.
                let n = state.storage.store.count("", "services") + 10;
                obj["spec"]["clusterIP"] = json!(format!("10.96.{}.{}", n / 250, n % 250 + 1));
                obj["spec"]["clusterIPs"] = json!([obj["spec"]["clusterIP"].clone()]);
            }
            if let Some(ports) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for p in ports {
                    if p.get("protocol").is_none() {
                        p["protocol"] = json!("TCP");
                    }
                    if p.get("targetPort").is_none() {
                        // Service defaulting (`SetDefaults_Service`): an absent targetPort is the
                        // port itself.
                        p["targetPort"] = p["port"].clone();
                    }
                }
            }
        }
        // The ServiceAccount admission plugin: a Pod that names no service account runs as `default`.
        ("", "Pod")
            if obj
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            obj["spec"]["serviceAccountName"] = json!("default");
        }
        ("", "Namespace") => {
            let name = obj
                .pointer("/metadata/name")
                .cloned()
                .unwrap_or(Value::Null);
            // Since 1.21 every Namespace carries its own name as this label (KEP-2161), which is
            // how a webhook's namespaceSelector names a single namespace.
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            obj["status"] = json!({"phase": "Active"});
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
            let stored: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v["storage"] == true)
                .map(|v| v["name"].clone())
                .collect();
            let t = now();
            obj["status"] = json!({
                "acceptedNames": names,
                "storedVersions": stored,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t},
                ]
            });
        }
        ("apiregistration.k8s.io", "APIService")
            if obj.pointer("/spec/service").is_none_or(Value::is_null) =>
        {
            obj["status"] = json!({"conditions": [{
                "type": "Available", "status": "True", "lastTransitionTime": now(),
                "reason": "Local", "message": "Local APIServices are always available"
            }]});
        }
        _ => {}
    }
}

fn slice_name(svc: &str, i: usize) -> String {
    let h = sha2::Sha256::digest(format!("{svc}/{i}").as_bytes());
    // apimachinery's `utilrand.String` alphabet (no vowels, so no words), the one generateName
    // suffixes are drawn from: slice names look like the mirroring controller's.
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = h
        .iter()
        .take(5)
        .map(|b| alphabet[*b as usize % alphabet.len()] as char)
        .collect();
    format!("{svc}-{suffix}")
}

/// EndpointSlices mirrored from one Endpoints object (empty when it was deleted).
fn mirror_slices(ep: Option<&Value>, ns: &str, name: &str) -> Vec<Value> {
    let Some(ep) = ep else { return Vec::new() };
    let subsets = ep["subsets"].as_array().cloned().unwrap_or_default();
    subsets
        .iter()
        .enumerate()
        .map(|(i, subset)| {
            let mut endpoints = Vec::new();
            // Not-ready addresses are kept with `ready: false` rather than dropped: readers of
            // slices decide readiness from the condition (1.34's aggregator counts
            // `ready == nil || true`, REFERENCE §2.1), and a pod that exists but is not ready is a
            // different finding from no pod at all.
            for (list, ready) in [("addresses", true), ("notReadyAddresses", false)] {
                for a in subset[list].as_array().into_iter().flatten() {
                    let mut e = json!({"addresses": [a["ip"].clone()], "conditions": {"ready": ready}});
                    if let Some(t) = a.get("targetRef") {
                        e["targetRef"] = t.clone();
                    }
                    endpoints.push(e);
                }
            }
            let ports: Vec<Value> = subset["ports"]
                .as_array()
                .into_iter()
                .flatten()
                // An unnamed port mirrors as the name "": kube-aggregator matches endpoint ports
                // to the Service port by *name* (MissingEndpoints, REFERENCE §2.1), and "" is what
                // an unnamed Service port matches.
                .map(|p| json!({"name": p.get("name").cloned().unwrap_or(json!("")), "port": p["port"], "protocol": p.get("protocol").cloned().unwrap_or(json!("TCP"))}))
                .collect();
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": slice_name(name, i),
                    "namespace": ns,
                    "labels": {
                        "kubernetes.io/service-name": name,
                        "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io",
                    },
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": ports,
            })
        })
        .collect()
}

fn sync_endpoint_slices(state: &State, ns: &str, name: &str) {
    let ep = state
        .storage
        .store
        .get(&Key::new("", "endpoints", ns, name));
    let wanted = mirror_slices(ep.as_ref(), ns, name);
    let (existing, _) = state
        .storage
        .store
        .list("discovery.k8s.io", "endpointslices", Some(ns));
    for old in existing.iter().filter(|s| {
        s.pointer("/metadata/labels/kubernetes.io~1service-name")
            .and_then(Value::as_str)
            == Some(name)
            && s.pointer("/metadata/labels/endpointslice.kubernetes.io~1managed-by")
                .and_then(Value::as_str)
                == Some("endpointslicemirroring-controller.k8s.io")
    }) {
        let n = old
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !wanted.iter().any(|w| w["metadata"]["name"] == n) {
            let _ = state.storage.store.delete(
                &Key::new("discovery.k8s.io", "endpointslices", ns, n),
                None,
                false,
            );
        }
    }
    for w in wanted {
        let n = w["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = Key::new("discovery.k8s.io", "endpointslices", ns, &n);
        match state.storage.store.get(&key) {
            Some(cur) => {
                let mut next = w.clone();
                next["metadata"] = cur["metadata"].clone();
                if next != cur {
                    let _ = state.storage.store.update(key, next, false);
                }
            }
            None => {
                let _ = state.storage.store.create(key, w, false);
            }
        }
    }
}

fn local_apiservice(group: &str, version: &str, gp: i64, vp: i64, automanaged: bool) -> Value {
    // `<version>.<group>`; the core group's is `v1.` with the trailing dot, as on a real cluster.
    let name = if group.is_empty() {
        format!("{version}.")
    } else {
        format!("{version}.{group}")
    };
    let mut o = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp, "service": null},
        "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now(), "reason": "Local", "message": "Local APIServices are always available"}]}
    });
    if automanaged {
        o["metadata"]["labels"] = json!({"kube-aggregator.kubernetes.io/automanaged": "true"});
    }
    o
}

/// Local APIServices for CRD group/versions: create missing, delete orphaned automanaged ones.
fn sync_crd_apiservices(state: &State) {
    let (crds, _) =
        state
            .storage
            .store
            .list("apiextensions.k8s.io", "customresourcedefinitions", None);
    let wanted: Vec<(String, String)> = crds
        .iter()
        .flat_map(registry::crd_resources)
        .map(|d| (d.group, d.version))
        .collect();
    let (services, _) = state
        .storage
        .store
        .list("apiregistration.k8s.io", "apiservices", None);
    for s in &services {
        let automanaged = s
            .pointer("/metadata/labels/kube-aggregator.kubernetes.io~1automanaged")
            .and_then(Value::as_str)
            == Some("true");
        let g = s
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let v = s
            .pointer("/spec/version")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let builtin = BUILTIN_GROUP_VERSIONS
            .iter()
            .any(|(bg, bv, _, _)| *bg == g && *bv == v);
        // Only APIServices the autoregister controller owns (label
        // kube-aggregator.kubernetes.io/automanaged) are removed with their CRD; one a user created
        // stays, as it does in kube-aggregator.
        if automanaged && !builtin && !wanted.iter().any(|(wg, wv)| wg == g && wv == v) {
            let n = s
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let _ = state.storage.store.delete(
                &Key::new("apiregistration.k8s.io", "apiservices", "", n),
                None,
                false,
            );
        }
    }
    for (g, v) in wanted {
        // The crdregistration controller's priorities for CRD groups (GroupPriorityMinimum 1000,
        // VersionPriority 100): below every built-in group in discovery order.
        let o = local_apiservice(&g, &v, 1000, 100, true);
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = Key::new("apiregistration.k8s.io", "apiservices", "", &name);
        if state.storage.store.get(&key).is_none() {
            let _ = state.storage.store.create(key, o, false);
        }
    }
}

/// React to a committed write of `def` (namespace and name of the object).
pub fn after_write(state: &State, def: &ResourceDef, ns: &str, name: &str) {
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "endpoints") => sync_endpoint_slices(state, ns, name),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            if state
                .storage
                .store
                .get(&Key::new(&def.group, &def.resource, "", name))
                .is_none()
            {
                // Deleting a CRD deletes its custom resources.
                delete_orphaned_custom_resources(state);
            }
            sync_crd_apiservices(state);
        }
        _ => {}
    }
    super::storage_faults::count_objects(state, def);
}

fn delete_orphaned_custom_resources(state: &State) {
    let served: Vec<(String, String)> = registry::all(&state.storage.store)
        .into_iter()
        .map(|d| (d.group, d.resource))
        .collect();
    // Custom resources live under their CRD's group; anything stored under a group/resource no
    // longer served (and not built in) belongs to a deleted CRD.
    for key in state.storage.store.keys() {
        if !served
            .iter()
            .any(|(g, r)| *g == key.group && *r == key.resource)
        {
            let _ = state.storage.store.delete(&key, None, false);
        }
    }
}

/// Replace `${ca:NAME}` in string values with the base64 PEM of that CA.
pub fn substitute_cas(state: &State, v: &mut Value) {
    match v {
        Value::String(s) if s.contains("${ca:") => {
            let mut out = s.clone();
            for name in state.pki.cas.keys() {
                let token = format!("${{ca:{name}}}");
                if out.contains(&token) {
                    let pem = state.pki.ca_pem(name).unwrap_or_default();
                    out = out.replace(
                        &token,
                        &base64::engine::general_purpose::STANDARD.encode(pem),
                    );
                }
            }
            *s = out;
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute_cas(state, x)),
        Value::Object(m) => m.values_mut().for_each(|x| substitute_cas(state, x)),
        _ => {}
    }
}

/// Load the start-up objects: built-in Local APIServices, mandatory APF objects, then the
/// scenario's objects (CRDs first, so their kinds resolve).
///
/// # Errors
/// A message naming the object that could not be stored.
pub fn load_initial(state: &State) -> Result<(), String> {
    let mut objects: Vec<Value> = BUILTIN_GROUP_VERSIONS
        .iter()
        .map(|(g, v, gp, vp)| local_apiservice(g, v, *gp, *vp, true))
        .collect();
    let scenario_names: Vec<(String, String)> = state
        .scenario
        .objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_string(),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mandatory = super::apf::mandatory_objects()
        .into_iter()
        .chain(super::rbac::bootstrap_objects());
    // A scenario object of the same kind and name replaces the built-in one, so a scenario can
    // model a cluster whose bootstrap RBAC or mandatory APF objects were edited.
    objects.extend(mandatory.filter(|o| {
        !scenario_names
            .iter()
            .any(|(k, n)| o["kind"] == k.as_str() && o["metadata"]["name"] == n.as_str())
    }));
    // The namespaces kube-apiserver's system-namespaces controller creates at start (a real one
    // also makes kube-node-lease, which no path this server models reads).
    for ns in ["default", "kube-system", "kube-public"] {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    let mut scenario_objects = state.scenario.objects.clone();
    scenario_objects.sort_by_key(|o| o["kind"] != "CustomResourceDefinition");
    for mut o in scenario_objects {
        substitute_cas(state, &mut o);
        objects.push(o);
    }
    // Loading is done in bulk: the per-write effects (EndpointSlice mirroring, CRD-backed local
    // APIServices, object counts) run once per object or kind at the end, and resource definitions
    // are looked up in a table built once the CRDs are in — per-object effects made loading
    // quadratic in the number of CRDs (minutes for the 2,000-CRD scale benchmark).
    let mut table: Option<std::collections::HashMap<(String, String), ResourceDef>> = None;
    let mut endpoints = Vec::new();
    let mut crds_loaded = false;
    let mut kinds: Vec<ResourceDef> = Vec::new();
    for o in objects {
        let api_version = o["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        let def = match registry::builtin_by_kind(&api_version, &kind) {
            Some(d) => Some(d),
            None => table
                .get_or_insert_with(|| {
                    registry::all(&state.storage.store)
                        .into_iter()
                        .map(|d| ((d.api_version(), d.kind.clone()), d))
                        .collect()
                })
                .get(&(api_version.clone(), kind.clone()))
                .cloned(),
        };
        let def = def.ok_or_else(|| format!("{api_version} {kind} is not served"))?;
        if kind == "CustomResourceDefinition"
            && let Some(why) = registry::crd_name_error(&o)
        {
            return Err(format!("CustomResourceDefinition: {why}"));
        }
        let mut o = o;
        if def.namespaced && o.pointer("/metadata/namespace").is_none() {
            o["metadata"]["namespace"] = json!("default");
        }
        default_on_create(state, &def, &mut o);
        let key = key_of(&def, &o);
        match state.storage.store.create(key.clone(), o.clone(), false) {
            Ok(_) => {}
            // Already there means a built-in object the scenario also lists (a Local APIService,
            // a default namespace): the scenario's fields win, the stored metadata (uid,
            // resourceVersion) stays.
            Err(StoreError::AlreadyExists) => {
                let mut cur = state.storage.store.get(&key).unwrap_or(Value::Null);
                cur = merge_initial(cur, o);
                let _ = state.storage.store.update(key.clone(), cur, false);
            }
            Err(e) => return Err(format!("{kind} {}: {e}", key.name)),
        }
        match (def.group.as_str(), def.resource.as_str()) {
            ("", "endpoints") => endpoints.push((key.namespace.clone(), key.name.clone())),
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                crds_loaded = true;
                table = None;
            }
            _ => {}
        }
        if !kinds
            .iter()
            .any(|k| k.group == def.group && k.resource == def.resource)
        {
            kinds.push(def);
        }
    }
    for (ns, name) in endpoints {
        sync_endpoint_slices(state, &ns, &name);
    }
    if crds_loaded {
        sync_crd_apiservices(state);
    }
    for def in &kinds {
        super::storage_faults::count_objects(state, def);
    }
    Ok(())
}

fn merge_initial(mut cur: Value, o: Value) -> Value {
    for (k, v) in o.as_object().into_iter().flatten() {
        if k != "metadata" {
            cur[k] = v.clone();
        }
    }
    if let Some(labels) = o.pointer("/metadata/labels") {
        cur["metadata"]["labels"] = labels.clone();
    }
    cur
}
