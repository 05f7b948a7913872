//! Go's `time.ParseDuration` (src/time/format.go), the grammar of every duration kube-apiserver
//! reads from a client or prints in its logs: `?timeout=` (endpoints/filters/
//! request_deadline.go `parseTimeout`) and the durations of trace lines.

use thiserror::Error;

/// Why a text is not a Go duration; the messages are Go's own.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GoDurationError {
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.input))]
    UnknownUnit { unit: String, input: String },
}

/// Go's `time.quote`: double quotes, with `"` and `\` escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

const NANOS_PER_UNIT: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{00b5}s", 1_000), // U+00B5 micro sign
    ("\u{03bc}s", 1_000), // U+03BC Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const MAX: u64 = 1 << 63;

/// Parse `s` as `time.ParseDuration` does, to signed nanoseconds: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`
/// (`1m30s`, `1.5s`, `.5h`, `-2ms`), or `0` alone without a unit. Out of range is invalid.
pub fn parse(s: &str) -> Result<i64, GoDurationError> {
    let invalid = || GoDurationError::Invalid(s.to_string());
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // `leadingInt`: the integer part, an overflow is an error.
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let mut v: u64 = 0;
        for d in rest[..int_len].bytes() {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
                .filter(|v| *v <= MAX)
                .ok_or_else(invalid)?;
        }
        let pre = int_len > 0;
        rest = &rest[int_len..];
        // `leadingFraction`: digits past 63 bits of precision are read and dropped.
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(r) = rest.strip_prefix('.') {
            let frac_len = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            let mut overflow = false;
            for d in r[..frac_len].bytes() {
                if overflow {
                    continue;
                }
                if f > (MAX - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(d - b'0');
                if y > MAX {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = frac_len > 0;
            rest = &r[frac_len..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(GoDurationError::MissingUnit(s.to_string()));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let Some(&(_, per)) = NANOS_PER_UNIT.iter().find(|(u, _)| *u == unit) else {
            return Err(GoDurationError::UnknownUnit {
                unit: unit.to_string(),
                input: s.to_string(),
            });
        };
        if v > MAX / per {
            return Err(invalid());
        }
        v *= per;
        if f > 0 {
            // Go's float arithmetic, truncated, so that `1.1s` is what Go makes of it.
            v += (f as f64 * (per as f64 / scale)) as u64;
            if v > MAX {
                return Err(invalid());
            }
        }
        total = total
            .checked_add(v)
            .filter(|t| *t <= MAX)
            .ok_or_else(invalid)?;
    }
    if neg {
        // -2^63 is representable; `total <= MAX` was checked above.
        return Ok((-(total as i128)) as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::{GoDurationError, parse};

    const S: i64 = 1_000_000_000;

    #[test]
    fn accepts_what_go_accepts() {
        // The cases of Go's own parseDurationTests (src/time/time_test.go).
        for (s, ns) in [
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600_000_000),
            ("5.s", 5 * S),
            (".5s", S / 2),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4_000_000),
            ("1.0040s", S + 4_000_000),
            ("100.00100s", 100 * S + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14 * S),
            ("15m", 15 * 60 * S),
            ("16h", 16 * 3600 * S),
            ("3h30m", (3 * 3600 + 30 * 60) * S),
            ("10.5s4m", 4 * 60 * S + 10 * S + S / 2),
            ("-2m3.4s", -(2 * 60 * S + 3 * S + 400_000_000)),
            (
                "1h2m3s4ms5us6ns",
                3600 * S + 2 * 60 * S + 3 * S + 4_000_000 + 5_000 + 6,
            ),
            ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * S + 425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * 60 * S),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * 60 * S),
            ("0.830103483285477580700h", 49 * 60 * S + 48_372_539_827),
            ("1m30s", 90 * S),
            ("1.5s", 1_500_000_000),
        ] {
            assert_eq!(parse(s), Ok(ns), "{s}");
        }
    }

    #[test]
    fn rejects_what_go_rejects_with_go_messages() {
        for s in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "\u{fffd}",
            "hello \u{fffd} world",
            "9223372036854775810ns",
            "9223372036854775808ns",
            "-9223372036854775809ns",
            "9223372036854776us",
            "3000000h",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "1.2.3s",
            "--1s",
            "ms",
            "1s ",
            " 1s",
        ] {
            assert!(parse(s).is_err(), "{s:?}");
        }
        assert_eq!(
            parse("foo").unwrap_err().to_string(),
            r#"time: invalid duration "foo""#
        );
        assert_eq!(
            parse("5").unwrap_err(),
            GoDurationError::MissingUnit("5".into())
        );
        assert_eq!(
            parse("1x").unwrap_err().to_string(),
            r#"time: unknown unit "x" in duration "1x""#
        );
    }
}
