//! The Prometheus text parser against real data and generated data: a differential test against
//! prometheus-parse on the real dumps, windows over real scrapes, property tests (render → parse
//! → equal; any bytes → no panic), and the streaming entry points over real sockets and files.

mod differential;
mod proptests;
mod real_dumps;
mod streaming;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use extpath::promtext::{MetricFamily, Selection, parse_str};

/// A real dump parsed whole, once per test binary: several tests read the same dumps, and parsing
/// is what costs in a debug build.
fn parsed(path: &Path) -> Arc<Vec<MetricFamily>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Vec<MetricFamily>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(f) = cache.lock().unwrap().get(path) {
        return f.clone();
    }
    let fams = parse_str(&read(path), &Selection::all())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fams = Arc::new(fams);
    cache
        .lock()
        .unwrap()
        .insert(path.to_path_buf(), fams.clone());
    fams
}

/// Every real `/metrics` dump under `fixtures/raw`, sorted.
fn real_dumps() -> Vec<PathBuf> {
    let root = crate::util::repo().join("fixtures/raw");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).expect("fixtures/raw") {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("-metrics.txt"))
            {
                out.push(f);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 30,
        "expected the real dumps, found {}",
        out.len()
    );
    out
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
