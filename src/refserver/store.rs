//! The object store: what etcd plus the watch cache are to kube-apiserver.
//!
//! It owns JSON objects keyed by (group, resource, namespace, name) — versionless, like etcd keys
//! `/registry/<group>/<resource>/<ns>/<name>` — one global resourceVersion counter, compare-and-swap
//! updates, and the event history that watches replay (with compaction: a watch from before the
//! oldest kept event gets `too old resource version: X (Y)`). It does not know kinds, versions,
//! defaults, admission or faults; the REST layer does that before calling in. Stored objects keep the
//! `apiVersion` they were written with (a CRD's storage version), so conversion can see the difference.
//! The faults and etcd metrics around each operation are [`super::storage_faults`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

/// Where an object lives, without its version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// API group ("" for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace ("" when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Key {
    /// A key.
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Key {
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change.
#[derive(Debug, Clone)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Which object.
    pub key: Key,
    /// The object after the change (before it, for a deletion, with the deletion's resourceVersion).
    pub object: Value,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such object.
    #[error("not found")]
    NotFound,
    /// Create of an existing name.
    #[error("already exists")]
    AlreadyExists,
    /// resourceVersion precondition failed.
    #[error("conflict")]
    Conflict,
    /// A watch or list from a compacted resourceVersion: (requested, oldest available).
    #[error("too old resource version: {0} ({1})")]
    Expired(u64, u64),
}

struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Event>,
    /// Highest resourceVersion no longer in `history`.
    compacted: u64,
    history_limit: usize,
    uid_counter: u64,
}

/// The store.
pub struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Event>,
    revision: watch::Sender<u64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn rv_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

fn set_meta(obj: &mut Value, field: &str, v: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"][field] = v;
}

/// The objects of one resource (in one namespace). Keys sort by group, resource, namespace, name,
/// so that is a contiguous range: a lookup costs what it returns, not the size of the store.
fn of_resource<'a>(
    inner: &'a Inner,
    group: &'a str,
    resource: &'a str,
    namespace: Option<&'a str>,
) -> impl Iterator<Item = (&'a Key, &'a Value)> {
    let start = Key::new(group, resource, namespace.unwrap_or(""), "");
    inner.objects.range(start..).take_while(move |(k, _)| {
        k.group == group && k.resource == resource && namespace.is_none_or(|ns| k.namespace == ns)
    })
}

impl Store {
    /// An empty store keeping at most `history_limit` events for watches.
    pub fn new(history_limit: usize) -> Self {
        let (events, _) = broadcast::channel(4096);
        let (revision, _) = watch::channel(0);
        Store {
            inner: Mutex::new(Inner {
                rv: 0,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                history_limit: history_limit.max(1),
                uid_counter: 0,
            }),
            events,
            revision,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current resourceVersion.
    pub fn revision(&self) -> u64 {
        self.lock().rv
    }

    /// A receiver that changes on every write (controllers wait on it).
    pub fn subscribe_revision(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    fn commit(&self, inner: &mut Inner, kind: EventType, key: Key, object: Value) {
        let ev = Event {
            rv: inner.rv,
            kind,
            key,
            object,
        };
        inner.history.push_back(ev.clone());
        while inner.history.len() > inner.history_limit {
            if let Some(old) = inner.history.pop_front() {
                inner.compacted = old.rv;
            }
        }
        let _ = self.events.send(ev);
        self.revision.send_replace(inner.rv);
    }

    /// One object.
    pub fn get(&self, key: &Key) -> Option<Value> {
        self.lock().objects.get(key).cloned()
    }

    /// Objects of a resource (in one namespace, or all when `namespace` is None), sorted by
    /// namespace and name, and the resourceVersion of the snapshot.
    pub fn list(&self, group: &str, resource: &str, namespace: Option<&str>) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = of_resource(&inner, group, resource, namespace)
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// How many objects of a resource there are (all namespaces), without copying them.
    pub fn count(&self, group: &str, resource: &str) -> usize {
        of_resource(&self.lock(), group, resource, None).count()
    }

    /// The first object of a resource (all namespaces) that `matches`, cloning only that one: for
    /// per-request lookups by a field (a Service by its cluster IP) on a large store.
    pub fn find(
        &self,
        group: &str,
        resource: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        of_resource(&self.lock(), group, resource, None)
            .find(|(_, v)| matches(v))
            .map(|(_, v)| v.clone())
    }

    /// Every key in the store.
    pub fn keys(&self) -> Vec<Key> {
        self.lock().objects.keys().cloned().collect()
    }

    /// Create. With `dry_run` nothing is stored and no event is sent, but the returned object looks
    /// as it would have (uid, timestamps; no resourceVersion, like the real dry run).
    pub fn create(&self, key: Key, mut obj: Value, dry_run: bool) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        if inner.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists);
        }
        inner.uid_counter += 1;
        let uid = format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            0x5eed_0000u32 + inner.uid_counter as u32,
            inner.uid_counter & 0xffff,
            (inner.uid_counter >> 4) & 0xfff,
            key.name.len() & 0xfff,
            inner.uid_counter * 7919
        );
        if obj.pointer("/metadata/uid").is_none() {
            set_meta(&mut obj, "uid", json!(uid));
        }
        if obj
            .pointer("/metadata/creationTimestamp")
            .is_none_or(Value::is_null)
        {
            set_meta(&mut obj, "creationTimestamp", json!(now_rfc3339()));
        }
        if obj.pointer("/metadata/generation").is_none() {
            set_meta(&mut obj, "generation", json!(1));
        }
        if dry_run {
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            return Ok(obj);
        }
        inner.rv += 1;
        set_meta(&mut obj, "resourceVersion", json!(inner.rv.to_string()));
        inner.objects.insert(key.clone(), obj.clone());
        self.commit(&mut inner, EventType::Added, key, obj.clone());
        Ok(obj)
    }

    /// Update with compare-and-swap on `metadata.resourceVersion` when the caller set it.
    pub fn update(&self, key: Key, mut obj: Value, dry_run: bool) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let Some(current) = inner.objects.get(&key) else {
            return Err(StoreError::NotFound);
        };
        if let Some(want) = rv_of(&obj)
            && Some(want) != rv_of(current)
        {
            return Err(StoreError::Conflict);
        }
        for field in ["uid", "creationTimestamp"] {
            if let Some(v) = current.pointer(&format!("/metadata/{field}")) {
                set_meta(&mut obj, field, v.clone());
            }
        }
        let spec_changed = current.get("spec") != obj.get("spec");
        let generation = current
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        set_meta(
            &mut obj,
            "generation",
            json!(if spec_changed {
                generation + 1
            } else {
                generation
            }),
        );
        if dry_run {
            return Ok(obj);
        }
        if *current == {
            let mut same = obj.clone();
            set_meta(
                &mut same,
                "resourceVersion",
                current["metadata"]["resourceVersion"].clone(),
            );
            same
        } {
            // No-op updates do not bump the resourceVersion, as in kube-apiserver.
            return Ok(current.clone());
        }
        inner.rv += 1;
        set_meta(&mut obj, "resourceVersion", json!(inner.rv.to_string()));
        inner.objects.insert(key.clone(), obj.clone());
        self.commit(&mut inner, EventType::Modified, key, obj.clone());
        Ok(obj)
    }

    /// Delete, with an optional resourceVersion precondition. Returns the deleted object.
    pub fn delete(
        &self,
        key: &Key,
        precondition_rv: Option<u64>,
        dry_run: bool,
    ) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let Some(current) = inner.objects.get(key) else {
            return Err(StoreError::NotFound);
        };
        if let Some(want) = precondition_rv
            && Some(want) != rv_of(current)
        {
            return Err(StoreError::Conflict);
        }
        if dry_run {
            return Ok(current.clone());
        }
        let mut obj = inner.objects.remove(key).unwrap_or(Value::Null);
        inner.rv += 1;
        set_meta(&mut obj, "resourceVersion", json!(inner.rv.to_string()));
        self.commit(&mut inner, EventType::Deleted, key.clone(), obj.clone());
        Ok(obj)
    }

    /// Events after `rv` that match `filter`, and a receiver for what follows, taken atomically.
    /// `rv == 0` means "from now, starting with the current state as ADDED events".
    pub fn watch_from(
        &self,
        rv: u64,
        filter: impl Fn(&Key) -> bool,
    ) -> Result<(Vec<Event>, broadcast::Receiver<Event>), StoreError> {
        let inner = self.lock();
        let rx = self.events.subscribe();
        if rv == 0 {
            let backlog = inner
                .objects
                .iter()
                .filter(|(k, _)| filter(k))
                .map(|(k, v)| Event {
                    rv: rv_of(v).unwrap_or(inner.rv),
                    kind: EventType::Added,
                    key: k.clone(),
                    object: v.clone(),
                })
                .collect();
            return Ok((backlog, rx));
        }
        if rv < inner.compacted {
            return Err(StoreError::Expired(rv, inner.compacted));
        }
        let backlog = inner
            .history
            .iter()
            .filter(|e| e.rv > rv && filter(&e.key))
            .cloned()
            .collect();
        Ok((backlog, rx))
    }

    /// Forget all history up to now (what etcd compaction does to old revisions).
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }
}

/// An object's `namespace/name` (`/name` when cluster-scoped): the order lists are served in and
/// continue from, and an object's identity across versions of its resource.
pub fn namespaced_name(o: &Value) -> String {
    format!(
        "{}/{}",
        o.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        o.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}})
    }

    #[test]
    fn compare_and_swap_and_history() {
        let s = Store::new(2);
        let k = Key::new("", "configmaps", "d", "a");
        let a = s.create(k.clone(), cm("a"), false).unwrap();
        assert_eq!(rv_of(&a), Some(1));
        assert_eq!(
            s.create(k.clone(), cm("a"), false),
            Err(StoreError::AlreadyExists)
        );
        let mut stale = a.clone();
        stale["data"] = json!({"x": "1"});
        let b = s.update(k.clone(), stale.clone(), false).unwrap();
        assert_eq!(rv_of(&b), Some(2));
        assert_eq!(s.update(k.clone(), stale, false), Err(StoreError::Conflict));
        s.create(Key::new("", "configmaps", "d", "b"), cm("b"), false)
            .unwrap();
        s.create(Key::new("", "configmaps", "d", "c"), cm("c"), false)
            .unwrap();
        assert_eq!(
            s.watch_from(1, |_| true).unwrap_err(),
            StoreError::Expired(1, 2)
        );
        let (backlog, _) = s.watch_from(2, |_| true).unwrap();
        assert_eq!(backlog.len(), 2);
        let dry = s
            .create(Key::new("", "configmaps", "d", "z"), cm("z"), true)
            .unwrap();
        assert!(dry.pointer("/metadata/resourceVersion").is_none());
        assert!(s.get(&Key::new("", "configmaps", "d", "z")).is_none());
    }
}
