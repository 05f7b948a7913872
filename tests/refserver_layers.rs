//! The reference server's internal layering (`src/refserver/mod.rs`): its modules import one way,
//! and the parts of the shared state never refer back to the whole. Read from the source, as the
//! compiler does not forbid a circle of `use super::…` between sibling modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

use crate::util::repo;

/// Top-level module of `src/refserver` → the top-level modules its code names (tests and
/// comments left out; the root `mod.rs`, parent of all, is not a node).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = repo().join("src/refserver");
    let mut modules = BTreeSet::new();
    for e in std::fs::read_dir(&root).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() || (p.extension().is_some_and(|x| x == "rs") && name != "mod") {
            modules.insert(name);
        }
    }
    let mut g = BTreeMap::new();
    for m in &modules {
        let mut files = Vec::new();
        collect_rs(&root.join(m), &mut files);
        collect_rs(&root.join(format!("{m}.rs")), &mut files);
        let mut deps = BTreeSet::new();
        for f in files {
            let depth = f.strip_prefix(&root).unwrap().components().count()
                - usize::from(f.file_name().is_some_and(|n| n == "mod.rs"));
            for name in named_modules(&std::fs::read_to_string(&f).unwrap(), depth) {
                if modules.contains(&name) && name != *m {
                    deps.insert(name);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

fn collect_rs(p: &Path, out: &mut Vec<std::path::PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            collect_rs(&e.unwrap().path(), out);
        }
    } else if p.is_file() && p.extension().is_some_and(|x| x == "rs") {
        out.push(p.to_path_buf());
    }
}

/// The top-level refserver modules a file at `depth` below `src/refserver` names: through
/// `crate::refserver::x`, or through as many `super::` as lead back to `src/refserver`.
fn named_modules(source: &str, depth: usize) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or_default();
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let krate = Regex::new(r"crate::refserver::(\w+)").unwrap();
    out.extend(krate.captures_iter(&code).map(|c| c[1].to_string()));
    let up = Regex::new(r"((?:super::\s*)+)(?:\{([^}]*)\}|(\w+))").unwrap();
    let word = Regex::new(r"\w+").unwrap();
    for c in up.captures_iter(&code) {
        if c[1].matches("super").count() != depth {
            continue;
        }
        match (c.get(2), c.get(3)) {
            (Some(group), _) => {
                // `super::{a, b::c}`: the first word of each item.
                for item in group.as_str().split(',') {
                    if let Some(w) = word.find(item) {
                        out.insert(w.as_str().to_string());
                    }
                }
            }
            (None, Some(name)) => {
                out.insert(name.as_str().to_string());
            }
            _ => {}
        }
    }
    out
}

/// A circle through `from`, if any.
fn circle(g: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn walk(
        g: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        for next in g.get(at).into_iter().flatten() {
            if *next == path[0] {
                let mut c = path.clone();
                c.push(next.clone());
                return Some(c);
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if let Some(c) = walk(g, next, path, seen) {
                    return Some(c);
                }
                path.pop();
            }
        }
        None
    }
    walk(g, from, &mut vec![from.to_string()], &mut BTreeSet::new())
}

#[test]
fn refserver_modules_import_one_way() {
    let g = graph();
    // The scan sees the edges the layering is about (a vacuous graph would pass anything).
    assert!(g["handler"].contains("state") && g["state"].contains("authn"));
    let circles: Vec<String> = g
        .keys()
        .filter_map(|m| circle(&g, m))
        .map(|c| c.join(" → "))
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn the_parts_of_the_state_never_name_the_whole() {
    let g = graph();
    let parts = &g["state"];
    assert!(parts.contains("network") && parts.contains("apf"));
    for part in parts {
        assert!(
            !g[part].contains("state"),
            "{part} is a part of State and imports state"
        );
    }
}

#[test]
fn a_circle_is_found_where_there_is_one() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circle(&g, "a").unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert!(circle(&g, "a").is_none());
    assert_eq!(
        named_modules(
            "use super::super::{state::State, store};\n// super::super::x\nuse super::y;",
            2
        ),
        BTreeSet::from(["state".to_string(), "store".to_string()])
    );
}
