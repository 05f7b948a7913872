//! Plain-text word wrapping for the terminal table's prose: greedy, never splitting a word, and
//! blind to ANSI colour codes (they take no room on screen).
//!
//! Not used for commands or Markdown: commands are never wrapped (they are copied into a shell),
//! and Markdown is wrapped by whatever renders it.

use std::io::Write;

/// Write `text` wrapped to `width`, the first line prefixed with `first` and the others with `rest`.
pub(crate) fn write_wrapped(
    out: &mut dyn Write,
    text: &str,
    first: &str,
    rest: &str,
    width: usize,
) -> std::io::Result<()> {
    // At least 20 columns of text however deep the indent, so that a nested line in a narrow
    // terminal still holds a few words instead of one per line.
    for (i, line) in wrap_words(text, width.saturating_sub(first.chars().count()).max(20))
        .into_iter()
        .enumerate()
    {
        writeln!(out, "{}{line}", if i == 0 { first } else { rest })?;
    }
    Ok(())
}

/// Greedy word wrap. Words longer than the width stay whole: breaking a URL, a path or an x509
/// message in the middle would make it harder to search for.
pub(crate) fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut cur_len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word_len = visible_len(word);
        if cur.is_empty() {
            cur.push_str(word);
            cur_len = word_len;
        } else if cur_len + 1 + word_len <= width {
            cur.push(' ');
            cur.push_str(word);
            cur_len += 1 + word_len;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur.push_str(word);
            cur_len = word_len;
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// Characters a terminal shows: ANSI colour sequences (`ESC [ … m`) take no room.
fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_long_words_whole() {
        assert_eq!(wrap_words("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(
            wrap_words("see https://example.com/a/very/long/path now", 10),
            ["see", "https://example.com/a/very/long/path", "now"]
        );
        assert_eq!(wrap_words("", 10), [""]);
    }

    #[test]
    fn colour_codes_take_no_width() {
        assert_eq!(visible_len("\u{1b}[1;31mcritical\u{1b}[0m"), 8);
        assert_eq!(
            wrap_words("x \u{1b}[1mbold\u{1b}[0m y", 8),
            ["x \u{1b}[1mbold\u{1b}[0m y"]
        );
    }
}
