//! Property tests, standing in for a fuzzer inside `cargo test`:
//!
//! * render → parse → equal: random families (every kind, nasty label values with quotes,
//!   backslashes, newlines, braces, commas, `=`, CR, any Unicode; NaN/±Inf/subnormal values;
//!   negative timestamps; HELP with escapes) rendered with random but valid formatting (blanks and
//!   tabs, label order, trailing commas, `{}`, `le` spellings, bucket order, TYPE after samples,
//!   CRLF, comments, no final newline) parse back to exactly the families generated — whole, under
//!   a random selection, and fed in random chunks;
//! * any bytes (random, or a valid exposition with random byte edits) never panic, and chunking
//!   never changes the outcome.
//!
//! Cases are modest by default so `cargo test` stays fast; `PROPTEST_CASES=N` runs more (the
//! figures of a long run are in docs/metrics-parser.md). The seed is fixed unless
//! `PROPTEST_RNG_SEED` is set, so a failure reproduces.

use extpath::promtext::{MetricFamily, ParseErrorKind, Parser, Selection, parse_str};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

use crate::util::random_exposition::{as_json, expected, families, normalised, render};

fn config(default_cases: u32) -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x0050_0A7E_0004);
    }
    c.failure_persistence = None;
    c
}

fn feed_in_chunks(
    bytes: &[u8],
    selection: &Selection,
    chunk: usize,
) -> Result<Vec<MetricFamily>, extpath::promtext::ParseError> {
    let mut p = Parser::new(selection);
    for c in bytes.chunks(chunk.max(1)) {
        p.feed(c)?;
    }
    p.finish()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn rendered_families_parse_back_exactly(
        fams in families(),
        seed in any::<u64>(),
        picks in proptest::collection::vec(any::<bool>(), 6),
        chunk in 1usize..64,
    ) {
        let text = render(&fams, seed);
        let want = expected(&fams);
        let got = parse_str(&text, &Selection::all())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(as_json(&normalised(got)), as_json(&want), "{}", text);

        // A selection returns exactly the selected part of the whole.
        let chosen: Vec<&str> = fams
            .iter()
            .zip(&picks)
            .filter(|(_, p)| **p)
            .map(|(f, _)| f.name.as_str())
            .collect();
        let selection = Selection::names(chosen.iter().copied());
        let want_some: Vec<MetricFamily> =
            want.iter().filter(|f| chosen.contains(&f.name.as_str())).cloned().collect();
        let got = feed_in_chunks(text.as_bytes(), &selection, chunk)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(as_json(&normalised(got)), as_json(&want_some), "{}", text);
    }

    #[test]
    fn any_bytes_never_panic_and_chunking_never_changes_the_outcome(
        input in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            (families(), any::<u64>(), proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 1..6))
                .prop_map(|(fams, seed, edits)| {
                    let mut b = render(&fams, seed).into_bytes();
                    for (at, byte, op) in edits {
                        let at = usize::from(at) % (b.len() + 1);
                        match op {
                            0 => b.insert(at, byte),
                            1 if at < b.len() => { b.remove(at); }
                            _ if at < b.len() => b[at] = byte,
                            _ => b.push(byte),
                        }
                    }
                    b
                }),
        ],
        all in any::<bool>(),
        chunk in 1usize..40,
    ) {
        let selection = if all {
            Selection::all()
        } else {
            Selection::names(["a", "h_0", "x_1"]).with_prefix("m")
        };
        let whole = feed_in_chunks(&input, &selection, input.len());
        let chunked = feed_in_chunks(&input, &selection, chunk);
        let lines = input.iter().filter(|&&b| b == b'\n').count() + 1;
        match (&whole, &chunked) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(as_json(a), as_json(b));
                for f in a {
                    prop_assert!(selection.wants(&f.name), "{} was not selected", f.name);
                    for s in &f.series {
                        prop_assert!(s.buckets.windows(2).all(|w| w[0].le.0 < w[1].le.0));
                    }
                }
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(a, b);
                prop_assert_eq!(a.kind, ParseErrorKind::Syntax);
                prop_assert!(a.line >= 1 && a.line <= lines, "line {} of {}", a.line, lines);
            }
            _ => prop_assert!(false, "whole {:?} but chunked {:?}", whole, chunked),
        }
        if let Ok(text) = std::str::from_utf8(&input) {
            let direct = parse_str(text, &selection);
            prop_assert_eq!(direct.map(|f| as_json(&f)), whole.map(|f| as_json(&f)));
        }
    }
}
