//! Compiled regular expressions shared by every evaluation: CEL's `matches()` and the `=~`/`!~`
//! label selectors of the metric functions.
//!
//! A rule is evaluated once per subject, so a pattern compiled per call was compiled thousands of
//! times on a large cluster (a third of `analyze`'s time at the scale benchmark's 2,856 subjects).
//! Patterns are rule literals in practice; one built from evidence could grow the cache, so it is
//! emptied when it reaches `LIMIT` (1,024) patterns.
//!
//! A compiled pattern is handed out shared (`Arc`), never cloned: a cloned `Regex` starts with an
//! empty pool of search caches, so every call allocated a new cache (a hot spot of the analysis
//! threads at 10,000 APIServices). Shared, each thread reuses its cache across calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;

/// Most patterns kept at once.
const LIMIT: usize = 1024;

/// `pattern` compiled, from the cache when it was compiled before.
///
/// # Errors
/// The regex crate's error for an invalid pattern (not cached).
pub fn compiled(pattern: &str) -> Result<Arc<Regex>, regex::Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(r) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(pattern) {
        return Ok(r.clone());
    }
    let r = Arc::new(Regex::new(pattern)?);
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= LIMIT {
        map.clear();
    }
    map.insert(pattern.to_string(), r.clone());
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_compiles_once_and_matches_like_the_regex_crate() {
        let a = compiled("bad status from [^ ]*: 401").unwrap();
        let b = compiled("bad status from [^ ]*: 401").unwrap();
        assert!(a.is_match("x bad status from https://10.0.0.1:443/apis: 401"));
        assert_eq!(a.as_str(), b.as_str());
        assert!(compiled("(unclosed").is_err());
    }
}
