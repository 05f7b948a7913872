//! The limits YAML input is parsed under, and what to say when a file breaks one.
//!
//! serde-saphyr bounds every parse (a "budget") so that hostile input cannot take unbounded memory
//! or time. Its fixed defaults (250,000 nodes, 1,000,000 events) are fine for configuration files
//! but refuse the bundles this tool writes for a large cluster (a 5,000-APIService `collect -o
//! yaml` has more than 250,000 nodes). The limits that count what a file *contains* therefore grow
//! with the file's size — a node or an event needs at least one byte of text, so a file can never
//! exceed them by being big, only by amplification — while the limits against amplification and
//! pathological structure stay fixed: nesting depth, aliases, anchors, anchor replays, documents.
//! docs/bundle.md#limits lists them.
//!
//! A breach is said as a sentence naming the limit, not serde-saphyr's `Debug` of its breach.

use serde_saphyr::budget::BudgetBreach;

/// Nodes (mappings, sequences, scalars) allowed at least, and per byte of input above that.
pub const MIN_NODES: usize = 250_000;
/// Parser events allowed at least; above that, two per byte (a node opens and closes).
pub const MIN_EVENTS: usize = 1_000_000;
/// Bytes of scalar text allowed at least; above that, the file's size.
pub const MIN_SCALAR_BYTES: usize = 64 * 1024 * 1024;
/// Nesting depth (a bundle needs fewer than 10 levels).
pub const MAX_DEPTH: usize = 64;
/// Aliases (`*name`) and anchors (`&name`) each; the tool's writer uses none.
pub const MAX_ALIASES: usize = 50_000;
/// YAML documents in one file (a bundle is one).
pub const MAX_DOCUMENTS: usize = 1_024;

/// The budget for a YAML text of `len` bytes.
pub fn budget_for(len: usize) -> serde_saphyr::Budget {
    let mut b = serde_saphyr::Budget::default();
    b.max_nodes = MIN_NODES.max(len);
    b.max_events = MIN_EVENTS.max(len.saturating_mul(2));
    b.max_total_scalar_bytes = MIN_SCALAR_BYTES.max(len);
    b.max_depth = MAX_DEPTH;
    b.max_aliases = MAX_ALIASES;
    b.max_anchors = MAX_ALIASES;
    b.max_documents = MAX_DOCUMENTS;
    b
}

/// Parse options for a YAML text of `len` bytes.
pub fn options_for(len: usize) -> serde_saphyr::Options {
    let mut o = serde_saphyr::Options::default();
    o.budget = Some(budget_for(len));
    o
}

/// The budget breach inside a parse error, if that is what it is.
fn breach_of(e: &serde_saphyr::Error) -> Option<&BudgetBreach> {
    let mut e = e;
    loop {
        match e {
            serde_saphyr::Error::Budget { breach, .. } => return Some(breach),
            serde_saphyr::Error::WithSnippet { error, .. }
            | serde_saphyr::Error::AliasError { error, .. } => e = error,
            _ => return None,
        }
    }
}

/// `1234567` → `1,234,567` (limits and counts in messages).
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// When `e` is a budget breach of a text of `len` bytes: a sentence saying which limit, how big it
/// is and why it exists (without the location, which the caller says once).
pub fn budget_sentence(e: &serde_saphyr::Error, len: usize) -> Option<String> {
    let b = budget_for(len);
    let what = match breach_of(e)? {
        BudgetBreach::Nodes { .. } => format!(
            "more than {} YAML nodes, the limit for a file of this size (one per byte, at least {}; only aliases repeating anchored content go beyond it)",
            thousands(b.max_nodes),
            thousands(MIN_NODES)
        ),
        BudgetBreach::Events { .. } => format!(
            "more than {} YAML parser events, the limit for a file of this size (two per byte, at least {})",
            thousands(b.max_events),
            thousands(MIN_EVENTS)
        ),
        BudgetBreach::ScalarBytes { .. } => format!(
            "more than {} bytes of YAML scalar text, the limit for a file of this size",
            thousands(b.max_total_scalar_bytes)
        ),
        BudgetBreach::Depth { .. } => format!(
            "YAML nested deeper than {} levels (a bundle needs fewer than 10)",
            b.max_depth
        ),
        BudgetBreach::Aliases { .. } => format!(
            "more than {} YAML aliases (*name); the tool writes none",
            thousands(b.max_aliases)
        ),
        BudgetBreach::Anchors { .. } => format!(
            "more than {} YAML anchors (&name); the tool writes none",
            thousands(b.max_anchors)
        ),
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => format!(
            "{} YAML aliases for {} anchors, more than {} per anchor (an alias bomb expands each one)",
            thousands(*aliases),
            thousands(*anchors),
            b.alias_anchor_ratio_multiplier
        ),
        BudgetBreach::RecordedAnchorEvents { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
            "YAML aliases that expand to more than the anchored content allowed (an alias bomb)"
                .to_string()
        }
        BudgetBreach::Documents { .. } => format!(
            "more than {} YAML documents in one file (a bundle is one document)",
            thousands(b.max_documents)
        ),
        BudgetBreach::MergeKeys { .. } => format!(
            "more than {} YAML merge keys (<<)",
            thousands(b.max_merge_keys)
        ),
        BudgetBreach::SequenceUnbalanced => {
            "unbalanced YAML structure (a collection closed that was never opened)".to_string()
        }
        _ => "YAML beyond a parsing limit".to_string(),
    };
    Some(format!(
        "refused to parse: {what}; these limits bound the memory a hostile file can take (docs/bundle.md#limits)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_file_and_have_floors() {
        let small = budget_for(10);
        assert_eq!(small.max_nodes, MIN_NODES);
        assert_eq!(small.max_events, MIN_EVENTS);
        let big = budget_for(100_000_000);
        assert_eq!(big.max_nodes, 100_000_000);
        assert_eq!(big.max_events, 200_000_000);
        assert_eq!(big.max_depth, MAX_DEPTH);
        assert_eq!(big.max_aliases, MAX_ALIASES);
    }

    #[test]
    fn a_breach_is_a_sentence() {
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let e = serde_saphyr::from_str_with_options::<serde_json::Value>(
            &deep,
            options_for(deep.len()),
        )
        .expect_err("too deep");
        let s = budget_sentence(&e, deep.len()).expect("a budget breach");
        assert!(s.contains("nested deeper than 64 levels"), "{s}");
        assert!(!s.contains('{') && !s.contains('\n'), "{s}");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
