//! What a backend's container writes to its log, as `kubectl logs` shows it: klog lines
//! (`E1129 08:50:11.402439       1 webhook.go:224] …`) stamped with the wall clock.
//!
//! A backend writes the lines its real counterpart writes when a scenario's fault hits it — the
//! sample-apiserver's `Failed to make webhook authorizer request: …` when its SubjectAccessReviews
//! are forbidden, `Unable to get configmap/extension-apiserver-authentication …` when it may not
//! read its authentication configuration, `"Unable to authenticate the request"` when it does not
//! trust the front proxy —
//! and the reference server serves them as the `log` subresource of the Pods whose IP the scenario's
//! `network` maps to that backend. A log is bounded: the oldest lines go first.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Lines kept per backend.
const MAX_LINES: usize = 2_000;

/// klog's severity letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `I`.
    Info,
    /// `W`.
    Warning,
    /// `E`.
    Error,
}

/// One backend's log.
#[derive(Debug, Default)]
pub struct ContainerLog {
    lines: Mutex<VecDeque<String>>,
}

impl ContainerLog {
    /// Append a klog line written at `source` (`webhook.go:224`) now.
    pub fn write(&self, level: Level, source: &str, message: &str) {
        let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
        let letter = match level {
            Level::Info => 'I',
            Level::Warning => 'W',
            Level::Error => 'E',
        };
        // klog's header: severity, mmdd hh:mm:ss.uuuuuu, the thread id right-aligned in 7.
        let line = format!(
            "{letter}{} {:>7} {source}] {message}",
            now.strftime("%m%d %H:%M:%S%.6f"),
            1
        );
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == MAX_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The last `tail` lines (all when `None`), newline-terminated, at most `limit_bytes` long
    /// (cut at a line boundary from the start, as `limitBytes` keeps the newest).
    pub fn text(&self, tail: Option<usize>, limit_bytes: Option<usize>) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let skip = tail.map_or(0, |t| lines.len().saturating_sub(t));
        let mut out: String = lines.iter().skip(skip).map(|l| format!("{l}\n")).collect();
        if let Some(limit) = limit_bytes
            && out.len() > limit
        {
            let cut = out.len() - limit;
            let start = if out.as_bytes()[cut - 1] == b'\n' {
                cut
            } else {
                out[cut..].find('\n').map_or(out.len(), |i| cut + i + 1)
            };
            out = out[start..].to_string();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_klog_and_the_tail_keeps_the_newest() {
        let log = ContainerLog::default();
        log.write(
            Level::Info,
            "secure_serving.go:213",
            "Serving securely on [::]:443",
        );
        log.write(
            Level::Error,
            "webhook.go:224",
            "Failed to make webhook authorizer request: x",
        );
        let all = log.text(None, None);
        let lines: Vec<&str> = all.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with('I'), "{}", lines[0]);
        assert!(
            lines[1].ends_with(" 1 webhook.go:224] Failed to make webhook authorizer request: x"),
            "{}",
            lines[1]
        );
        // The header parses as klog's: `Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`.
        let re =
            regex::Regex::new(r"^[IE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +1 [a-z_.]+:\d+\] ").unwrap();
        assert!(lines.iter().all(|l| re.is_match(l)), "{all}");
        assert_eq!(log.text(Some(1), None).lines().count(), 1);
        assert!(log.text(None, Some(lines[1].len() + 1)).starts_with('E'));
        assert!(
            log.text(None, Some(lines[1].len())).is_empty(),
            "no partial line"
        );
    }
}
