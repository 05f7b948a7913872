//! Every input the fuzzers found a defect with (`fuzz/regressions/<target>/`), and every seed of
//! their corpora (`fuzz/corpus/<target>/`), replayed on stable through the very function the fuzz
//! target calls (`extpath::fuzzing::Target::run`): no panic, and a bounded result.

use std::path::Path;

use extpath::fuzzing::{Outcome, Target, message_bound};

use crate::util::repo;

/// Every (target, file) under `dir/<target>/`; a directory that names no target is an error.
fn inputs(dir: &Path) -> Vec<(Target, std::path::PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let e = e.expect("readable directory entry");
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.path().is_dir() {
            continue;
        }
        let target = Target::from_name(&name)
            .unwrap_or_else(|| panic!("{}: no fuzz target is called {name:?}", dir.display()));
        let mut files: Vec<_> = std::fs::read_dir(e.path())
            .expect("readable target directory")
            .map(|f| f.expect("readable entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|f| (target, f)));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

fn replay(target: Target, file: &Path) -> Outcome {
    let data = std::fs::read(file).expect("readable input");
    let outcome = std::panic::catch_unwind(|| target.run(&data))
        .unwrap_or_else(|_| panic!("{} panics on {}", target.name(), file.display()));
    match &outcome {
        Outcome::Accepted(n) => assert!(
            *n <= data.len(),
            "{}: {n} items from {} bytes",
            file.display(),
            data.len()
        ),
        Outcome::Refused(m) => assert!(
            m.len() <= message_bound(data.len()) && !m.contains('\n'),
            "{}: unbounded error {m:?}",
            file.display()
        ),
    }
    outcome
}

#[test]
fn fuzz_regressions_replay_without_panic() {
    let found = inputs(&repo().join("fuzz/regressions"));
    for (target, file) in &found {
        replay(*target, file);
    }
    eprintln!("{} regression input(s) replayed", found.len());
}

#[test]
fn fuzz_corpus_seeds_are_accepted() {
    // The seeds come from fixtures/ (whole files or whole families cut from them), so each target
    // must accept them: a seed that is refused would point the fuzzer at the error path only.
    let seeds = inputs(&repo().join("fuzz/corpus"));
    for t in Target::ALL {
        let n = seeds.iter().filter(|(s, _)| *s == t).count();
        assert!(n >= 2, "fuzz/corpus/{} has {n} seed(s)", t.name());
    }
    for (target, file) in &seeds {
        if let Outcome::Refused(m) = replay(*target, file) {
            panic!("{}: the seed is refused: {m}", file.display());
        }
    }
}
