//! REST verbs on locally served resources: get, list (limit/continue, label and field selectors,
//! Table output), create, update (resourceVersion compare-and-swap), patch, delete and
//! deletecollection, all with `dryRun=All`.
//!
//! Order inside a write is kube-apiserver's: decode → defaulting → mutating admission → validating
//! admission → storage (where faults apply) → post-write controllers. Reads of custom resources at a
//! version other than the stored one go through conversion. Watch is in `watch.rs`.

use crate::refserver::store::namespaced_name;
use std::sync::Arc;

use axum::body::Body;
use base64::Engine;
use bytes::Bytes;
use http::Response;
use serde_json::{Value, json};

use super::super::admission::{self, Operation};
use super::super::authn::UserInfo;
use super::super::controllers::{after_write, default_on_create, key_of};
use super::super::conversion;
use super::super::patch::apply_patch;
use super::super::registry::ResourceDef;
use super::super::request::RequestInfo;
use super::super::state::State;
use super::super::status::{ApiError, json_response};
use super::super::storage_faults::storage_op;
use super::super::store::{Key, StoreError};
use super::select::filter;
use super::table;

/// What the REST handler needs from the HTTP request.
pub struct Call<'a> {
    /// Parsed request.
    pub info: &'a RequestInfo,
    /// Resolved resource.
    pub def: &'a ResourceDef,
    /// Body.
    pub body: &'a Bytes,
    /// `Content-Type`.
    pub content_type: &'a str,
    /// `Accept`.
    pub accept: &'a str,
    /// The user.
    pub user: &'a UserInfo,
}

fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(&def.group, &def.resource, name),
        StoreError::AlreadyExists => ApiError::already_exists(&def.group, &def.resource, name),
        StoreError::Conflict => ApiError::conflict(&def.group, &def.resource, name),
        StoreError::Expired(a, b) => {
            ApiError::expired(format!("too old resource version: {a} ({b})"))
        }
    }
}

fn namespace_of(def: &ResourceDef, info: &RequestInfo) -> String {
    if def.namespaced {
        info.namespace.clone()
    } else {
        String::new()
    }
}

async fn get(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    // Faults apply to reads too: a stalled etcd stalls gets and lists, not only writes (capture
    // 13: a paginated `kubectl get cm` timed out while etcd was frozen).
    storage_op(state, def, "get").await?;
    let key = Key::new(
        &def.group,
        &def.resource,
        &namespace_of(def, info),
        &info.name,
    );
    let obj = state
        .storage
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.resource, &info.name))?;
    let obj = conversion::to_version(state, def, vec![obj])
        .await?
        .pop()
        .unwrap_or(Value::Null);
    if table::wants_table(call.accept) {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        return Ok(json_response(200, &table::table(&def.kind, &[obj], &rv)));
    }
    Ok(json_response(200, &obj))
}

async fn list(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    storage_op(state, def, "list").await?;
    let ns = namespace_of(def, info);
    let (items, rv) = state.storage.store.list(
        &def.group,
        &def.resource,
        if ns.is_empty() {
            None
        } else {
            Some(ns.as_str())
        },
    );
    let keep = filter(info)?;
    let mut items: Vec<Value> = items.into_iter().filter(|o| keep(o)).collect();
    // continue = base64 of the last key returned; limit pages by namespace/name order, the order
    // of etcd's range reads over `/registry/<resource>/<ns>/<name>`. Clients treat the token as
    // opaque (kube-apiserver's is base64 JSON with a resourceVersion and a start key), so this
    // simpler one pages the same way for kubectl and client-go.
    if let Some(token) = info.param("continue").filter(|t| !t.is_empty()) {
        let after = base64::engine::general_purpose::STANDARD
            .decode(token)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
        items.retain(|o| namespaced_name(o) > after);
    }
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(limit) = info
        .param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        // `limit=0` means no limit in the list API, not an empty page.
        .filter(|l| *l > 0)
        && items.len() > limit
    {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = items.last().map(namespaced_name).unwrap_or_default();
        meta["continue"] = json!(base64::engine::general_purpose::STANDARD.encode(last));
        meta["remainingItemCount"] = json!(remaining);
    }
    let items = conversion::list_to_version(state, def, items).await?;
    // `kubectl get` asks for `as=Table` and prints the server's columns; without it kubectl would
    // fall back to its own printers and the output would not look like a real cluster's.
    if table::wants_table(call.accept) {
        let mut t = table::table(&def.kind, &items, &rv.to_string());
        t["metadata"] = meta;
        return Ok(json_response(200, &t));
    }
    Ok(json_response(
        200,
        &json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(),
            "metadata": meta,
            "items": items,
        }),
    ))
}

fn decode_body(call: &Call<'_>) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(call.body).or_else(|_| {
        std::str::from_utf8(call.body)
            .ok()
            .and_then(|t| serde_saphyr::from_str::<Value>(t).ok())
            .ok_or_else(|| {
                ApiError::bad_request("the body of the request was in an unknown format")
            })
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format",
        ));
    }
    Ok(v)
}

fn check_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let kind = obj["kind"].as_str().unwrap_or("");
    if !kind.is_empty() && kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            obj["apiVersion"].as_str().unwrap_or(""),
            def.api_version()
        )));
    }
    obj["kind"] = json!(def.kind);
    obj["apiVersion"] = json!(def.api_version());
    Ok(())
}

async fn create(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    let mut obj = decode_body(call)?;
    check_type(def, &mut obj)?;
    if def.namespaced {
        let ns = info.namespace.clone();
        match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(n) if n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => obj["metadata"]["namespace"] = json!(ns),
        }
    }
    if obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        match obj
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
        {
            Some(prefix) => {
                // kube-apiserver appends five random characters (`SimpleNameGenerator`); derived
                // from the revision here so that replays and their snapshots are reproducible.
                let n = state.storage.store.revision() * 7919 % 100_000;
                obj["metadata"]["name"] = json!(format!("{prefix}{n:05}"));
            }
            None => {
                return Err(ApiError::invalid(
                    &def.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        }
    }
    if def.group == "apiextensions.k8s.io"
        && def.resource == "customresourcedefinitions"
        && let Some(why) = crate::refserver::registry::crd_name_error(&obj)
    {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        return Err(ApiError::invalid(&def.kind, name, &why));
    }
    default_on_create(state, def, &mut obj);
    let obj = admission::admit(state, def, Operation::Create, obj, None, call.user, info).await?;
    let obj = conversion::to_storage(state, def, obj).await?;
    storage_op(state, def, "create").await?;
    let key = key_of(def, &obj);
    let created = state
        .storage
        .store
        .create(key.clone(), obj, info.dry_run())
        .map_err(|e| store_err(def, &key.name, e))?;
    // A dry run has been through admission, validation and the store's checks (an existing name
    // still conflicts) but was not written, so no controller may react to it.
    if !info.dry_run() {
        after_write(state, def, &key.namespace, &key.name);
    }
    let created = conversion::to_version(state, def, vec![created])
        .await?
        .pop()
        .unwrap_or(Value::Null);
    Ok(json_response(201, &created))
}

async fn write_update(
    state: &Arc<State>,
    call: &Call<'_>,
    mut obj: Value,
    current: Value,
) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    check_type(def, &mut obj)?;
    // The status-subresource contract (CRD docs, "Status subresource"): a write to `/status`
    // changes only `.status`, and a write to the object itself cannot change `.status` — which
    // is why controllers and users cannot overwrite each other's half.
    if info.subresource == "status" {
        // Only status changes through /status.
        let mut next = current.clone();
        next["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
        if let Some(rv) = obj.pointer("/metadata/resourceVersion") {
            next["metadata"]["resourceVersion"] = rv.clone();
        }
        obj = next;
    } else if let Some(status) = current
        .get("status")
        .filter(|_| def.subresources.iter().any(|s| s == "status"))
    {
        obj["status"] = status.clone();
    }
    obj["metadata"]["name"] = json!(info.name);
    if def.namespaced {
        obj["metadata"]["namespace"] = json!(info.namespace);
    }
    let obj = admission::admit(
        state,
        def,
        Operation::Update,
        obj,
        Some(current),
        call.user,
        info,
    )
    .await?;
    let obj = conversion::to_storage(state, def, obj).await?;
    storage_op(state, def, "update").await?;
    let key = key_of(def, &obj);
    let updated = state
        .storage
        .store
        .update(key.clone(), obj, info.dry_run())
        .map_err(|e| store_err(def, &key.name, e))?;
    if !info.dry_run() {
        after_write(state, def, &key.namespace, &key.name);
    }
    let updated = conversion::to_version(state, def, vec![updated])
        .await?
        .pop()
        .unwrap_or(Value::Null);
    Ok(json_response(200, &updated))
}

async fn current(
    state: &Arc<State>,
    def: &ResourceDef,
    info: &RequestInfo,
) -> Result<Value, ApiError> {
    storage_op(state, def, "get").await?;
    let key = Key::new(
        &def.group,
        &def.resource,
        &namespace_of(def, info),
        &info.name,
    );
    let cur = state
        .storage
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.resource, &info.name))?;
    Ok(conversion::to_version(state, def, vec![cur])
        .await?
        .pop()
        .unwrap_or(Value::Null))
}

async fn update(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let obj = decode_body(call)?;
    let cur = current(state, call.def, call.info).await?;
    write_update(state, call, obj, cur).await
}

async fn patch(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let cur = current(state, call.def, call.info).await?;
    let mut next = cur.clone();
    apply_patch(&mut next, call.content_type, call.body)?;
    write_update(state, call, next, cur).await
}

async fn delete(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    let cur = current(state, def, info).await?;
    // DeleteOptions `preconditions.resourceVersion`: the delete is a compare-and-swap like an
    // update (409 when the object changed since it was read).
    let precondition = serde_json::from_slice::<Value>(call.body)
        .ok()
        .and_then(|o| {
            o.pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
        });
    admission::admit(
        state,
        def,
        Operation::Delete,
        Value::Null,
        Some(cur),
        call.user,
        info,
    )
    .await?;
    storage_op(state, def, "delete").await?;
    let key = Key::new(
        &def.group,
        &def.resource,
        &namespace_of(def, info),
        &info.name,
    );
    let gone = state
        .storage
        .store
        .delete(&key, precondition, info.dry_run())
        .map_err(|e| store_err(def, &info.name, e))?;
    if !info.dry_run() {
        after_write(state, def, &key.namespace, &key.name);
    }
    Ok(json_response(200, &gone))
}

async fn delete_collection(
    state: &Arc<State>,
    call: &Call<'_>,
) -> Result<Response<Body>, ApiError> {
    let (info, def) = (call.info, call.def);
    let ns = namespace_of(def, info);
    let (items, rv) = state.storage.store.list(
        &def.group,
        &def.resource,
        if ns.is_empty() {
            None
        } else {
            Some(ns.as_str())
        },
    );
    let keep = filter(info)?;
    let mut deleted = Vec::new();
    // One admission call and one storage delete per object, as kube-apiserver's
    // `DeleteCollection` deletes item by item: a storage fault applies to every delete, and a
    // webhook that refuses an item fails the call.
    for o in items.into_iter().filter(|o| keep(o)) {
        admission::admit(
            state,
            def,
            Operation::Delete,
            Value::Null,
            Some(o.clone()),
            call.user,
            info,
        )
        .await?;
        storage_op(state, def, "delete").await?;
        let key = key_of(def, &o);
        if let Ok(gone) = state.storage.store.delete(&key, None, info.dry_run()) {
            if !info.dry_run() {
                after_write(state, def, &key.namespace, &key.name);
            }
            deleted.push(gone);
        }
    }
    Ok(json_response(
        200,
        &json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": deleted}),
    ))
}

/// Serve one resource request (not watch).
///
/// # Errors
/// Any Status the verb produces.
pub async fn serve(state: &Arc<State>, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let info = call.info;
    if !info.subresource.is_empty() && !call.def.subresources.contains(&info.subresource) {
        return Err(ApiError::path_not_found());
    }
    match info.verb.as_str() {
        "get" => get(state, call).await,
        "list" => list(state, call).await,
        "create" if info.name.is_empty() => create(state, call).await,
        "update" => update(state, call).await,
        "patch" => patch(state, call).await,
        "delete" => delete(state, call).await,
        "deletecollection" => delete_collection(state, call).await,
        verb => Err(ApiError::method_not_allowed(
            &call.def.group,
            &call.def.resource,
            verb,
        )),
    }
}
