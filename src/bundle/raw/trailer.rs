//! The lines a client (or the shell that ran it) leaves at the end of its output.
//!
//! Captures of client commands end with what curl's `-w` and the capturing shell printed:
//! `HTTP 503 time_total=0.005309`, `HTTP=504 dur=10.02`, `HTTP 200`, curl's own error line
//! `curl: (28) Operation timed out after 60001 milliseconds …`, and exit lines such as `exit=1`,
//! `exit=124 dur=60.01` or `curl exit=28 dur=60.01`. They are parsed here once, for every reader of
//! client output (kubectl stderr and traces, curl bodies, watch streams).

use std::sync::LazyLock;

use regex::Regex;

/// One trailer line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Trailer {
    /// curl `-w` status line: status and total time in seconds, when printed.
    HttpStatus { code: u16, seconds: Option<f64> },
    /// `curl: (N) message`.
    CurlError { code: i32, message: String },
    /// `curl exit=N [dur=S]`.
    CurlExit { code: i32, seconds: Option<f64> },
    /// `exit=N [dur=S]` (a command's exit status as the capturing shell wrote it).
    Exit { code: i32, seconds: Option<f64> },
}

static HTTP_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^HTTP[ =](\d{3})(?:\s+(?:time_total|dur|time)=([0-9.]+)s?)?\s*$")
        .expect("static regex")
});
static CURL_ERROR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^curl: \((\d+)\) (.*)$").expect("static regex"));
static EXIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(curl )?exit=(\d+)(?:\s+dur=([0-9.]+)s?)?\s*$").expect("static regex")
});

fn seconds(m: Option<regex::Match<'_>>) -> Option<f64> {
    m.and_then(|m| m.as_str().parse().ok())
}

/// Parse a trailer line; `None` for anything else.
pub(crate) fn parse_trailer(line: &str) -> Option<Trailer> {
    let line = line.trim();
    if let Some(c) = HTTP_STATUS.captures(line) {
        return Some(Trailer::HttpStatus {
            code: c[1].parse().ok()?,
            seconds: seconds(c.get(2)),
        });
    }
    if let Some(c) = CURL_ERROR.captures(line) {
        return Some(Trailer::CurlError {
            code: c[1].parse().ok()?,
            message: c[2].to_string(),
        });
    }
    let c = EXIT.captures(line)?;
    let code = c[2].parse().ok()?;
    let secs = seconds(c.get(3));
    Some(if c.get(1).is_some() {
        Trailer::CurlExit {
            code,
            seconds: secs,
        }
    } else {
        Trailer::Exit {
            code,
            seconds: secs,
        }
    })
}

/// What curl's exit codes mean, for the ones a diagnosis meets (curl's `libcurl-errors`).
pub(crate) fn curl_exit_meaning(code: i32) -> Option<&'static str> {
    Some(match code {
        6 => "could not resolve host",
        7 => "failed to connect to host",
        18 => "partial file: transfer closed with outstanding read data remaining",
        28 => "operation timed out",
        35 => "TLS handshake failed",
        52 => "empty reply from server",
        56 => "failure receiving network data",
        58 => "problem with the local client certificate",
        60 => "server certificate could not be verified",
        92 => "HTTP/2 stream error",
        _ => return None,
    })
}

/// The trailer lines at the end of `lines` (in file order) and the index where they start.
///
/// Only the tail is searched: a body can itself hold a line such as `HTTP 200` (an HTML page, a
/// log excerpt), and what curl and the shell print comes after the body, never inside it.
pub(crate) fn split_trailer(lines: &[&str]) -> (usize, Vec<Trailer>) {
    let mut start = lines.len();
    while start > 0 {
        let l = lines[start - 1].trim();
        if l.is_empty() || parse_trailer(l).is_some() {
            start -= 1;
        } else {
            break;
        }
    }
    let found = lines[start..]
        .iter()
        .filter_map(|l| parse_trailer(l))
        .collect();
    (start, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capture_trailers_parse() {
        assert_eq!(
            parse_trailer("HTTP 503 time_total=0.005309"),
            Some(Trailer::HttpStatus {
                code: 503,
                seconds: Some(0.005309)
            })
        );
        assert_eq!(
            parse_trailer("HTTP=504 dur=10.02"),
            Some(Trailer::HttpStatus {
                code: 504,
                seconds: Some(10.02)
            })
        );
        assert_eq!(
            parse_trailer("curl exit=28 dur=60.013871510"),
            Some(Trailer::CurlExit {
                code: 28,
                seconds: Some(60.01387151)
            })
        );
        assert_eq!(
            parse_trailer("exit=1"),
            Some(Trailer::Exit {
                code: 1,
                seconds: None
            })
        );
        assert!(matches!(
            parse_trailer(
                "curl: (92) HTTP/2 stream 1 was not closed cleanly: INTERNAL_ERROR (err 2)"
            ),
            Some(Trailer::CurlError { code: 92, .. })
        ));
        assert_eq!(parse_trailer("HTTP/2 200"), None);
    }
}
