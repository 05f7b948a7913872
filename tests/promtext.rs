//! The Prometheus text parser against real data and generated data: a differential test against
//! prometheus-parse on the real dumps, windows over real scrapes, property tests (render → parse
//! → equal; any bytes → no panic), and the streaming entry points over real sockets and files.

mod differential;
mod proptests;
mod random_exposition;
mod real_dumps;
mod streaming;

use std::path::PathBuf;

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
