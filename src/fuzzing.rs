//! The bodies of the fuzz targets: one function per entry point that reads input nobody vetted,
//! taking raw bytes.
//!
//! `fuzz/` (a cargo-fuzz workspace of its own) calls [`Target::run`] from each target, and the
//! stable regression test (`tests/fuzz_regressions.rs`) replays every file under
//! `fuzz/regressions/<target>/` through the same call, so a committed crash input goes through
//! exactly the code that found it. Beyond "does not panic", each body checks what the project
//! promises of bad input (STYLE: a message naming the file and place): an error is one line that
//! names the file. What loads is pushed one step further, where the next consumer of that input
//! would be: a bundle is analysed, rendered and written back out and must load again; a
//! Prometheus text must parse the same however it is cut into chunks, and what it parsed to must
//! be written and read back.
//!
//! It owns no parser: every function here only calls the public entry point the CLI uses.

use std::cell::RefCell;
use std::sync::OnceLock;

use crate::bundle::EvidenceBundle;
use crate::engine::rules::check::SampleWorld;
use crate::engine::{Filter, RuleSet, Settings};
use crate::promtext::{Parser, Selection};

/// The file name every input is given, so error messages can be checked for naming it.
pub const INPUT_NAME: &str = "fuzz-input";

/// One fuzz target: an untrusted-input entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `/metrics` text: [`crate::promtext`] streaming parser, window and quantile arithmetic.
    Promtext,
    /// A bundle file in YAML ([`crate::bundle::load_bundle_str`]), then analysis of what loads.
    BundleYaml,
    /// A bundle file in JSON (same entry point; the corpus keeps the fuzzer in JSON).
    BundleJson,
    /// One raw file for `import --raw` ([`crate::bundle::raw::import_bytes`]), named on the
    /// command line and found in a directory.
    RawImport,
    /// PEM certificates and the DER inside ([`crate::pki::decode_pem`], [`crate::pki::decode_der`]).
    Pem,
    /// A rule file with CEL expressions ([`crate::engine::rules::load::load_one_all`]).
    Rules,
    /// A reference-server scenario file ([`crate::refserver::scenario::load_str`]).
    Scenario,
    /// A waivers file ([`crate::engine::waivers::parse_waivers`]) and its subject globs.
    Waivers,
}

impl Target {
    /// Every target, in the order `.ci/run` runs them.
    pub const ALL: [Target; 8] = [
        Target::Promtext,
        Target::BundleYaml,
        Target::BundleJson,
        Target::RawImport,
        Target::Pem,
        Target::Rules,
        Target::Scenario,
        Target::Waivers,
    ];

    /// The cargo-fuzz target name, also the directory under `fuzz/corpus` and `fuzz/regressions`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Promtext => "promtext",
            Target::BundleYaml => "bundle_yaml",
            Target::BundleJson => "bundle_json",
            Target::RawImport => "raw_import",
            Target::Pem => "pem",
            Target::Rules => "rules",
            Target::Scenario => "scenario",
            Target::Waivers => "waivers",
        }
    }

    /// The target called `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Feed `data` to the entry point. Panics only when the code under test breaks a promise
    /// (that is the finding); otherwise returns what came of it.
    pub fn run(self, data: &[u8]) -> Outcome {
        match self {
            Target::Promtext => promtext(data),
            Target::BundleYaml | Target::BundleJson => bundle(data),
            Target::RawImport => raw_import(data),
            Target::Pem => pem(data),
            Target::Rules => rules(data),
            Target::Scenario => scenario(data),
            Target::Waivers => waivers(data),
        }
    }
}

/// What one input came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted; how many items it gave (families, objects, certificates, rules, waivers).
    Accepted(usize),
    /// Refused with this message.
    Refused(String),
}

/// The longest error message accepted for an input of `len` bytes: a message may quote the input
/// (escaped), but must not grow beyond it.
pub fn message_bound(len: usize) -> usize {
    1024 + 8 * len
}

/// An error of an entry point: one line, naming the file (`file`, for those that read one),
/// bounded by the input.
fn refused(message: String, len: usize, file: Option<&str>) -> Outcome {
    assert!(
        !message.contains('\n'),
        "error message spans lines: {message:?}"
    );
    assert!(
        file.is_none_or(|f| message.contains(f)),
        "error message does not name the file {file:?}: {message:?}"
    );
    assert!(
        message.len() <= message_bound(len),
        "error message of {} bytes for {len} bytes of input",
        message.len()
    );
    Outcome::Refused(message)
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

fn promtext(data: &[u8]) -> Outcome {
    let all = Selection::all();
    let whole = {
        let mut p = Parser::new(&all);
        p.feed(data).and_then(|()| p.finish())
    };
    // The same bytes cut at two places the input chooses must parse the same: a body arrives in
    // chunks that split lines, escapes and UTF-8 characters anywhere.
    let (a, b) = match data.len() {
        0 => (0, 0),
        n => (
            usize::from(data[0]) % (n + 1),
            n - usize::from(data[n - 1]) % (n + 1),
        ),
    };
    let (a, b) = (a.min(b), a.max(b));
    let chunked = {
        let mut p = Parser::new(&all);
        p.feed(&data[..a])
            .and_then(|()| p.feed(&data[a..b]))
            .and_then(|()| p.feed(&data[b..]))
            .and_then(|()| p.finish())
    };
    assert_eq!(
        format!("{whole:?}"),
        format!("{chunked:?}"),
        "chunks at {a} and {b} parse differently"
    );
    let families = match whole {
        Ok(f) => f,
        Err(e) => return refused(e.to_string(), data.len(), None),
    };
    for fam in &families {
        for s in &fam.series {
            for q in [0.0, 0.5, 0.99, 1.0] {
                let _ = crate::promtext::histogram_quantile(q, &s.buckets);
            }
        }
    }
    let mut after = families.clone();
    crate::promtext::apply_window(&crate::promtext::window_start(&families), &mut after, 30.0);
    crate::promtext::apply_window(&families, &mut after, 0.0);
    // What was parsed is written back for replays; it must read back as the same families.
    let written = crate::promtext::write_text(&families);
    let again = crate::promtext::parse_str(&written, &all)
        .unwrap_or_else(|e| panic!("written text does not parse: {e}\n{written}"));
    assert_eq!(
        again.len(),
        families.len(),
        "written text has another number of families\n{written}"
    );
    Outcome::Accepted(families.len())
}

/// The bundled rules, compiled once per process (compiling CEL dominates otherwise).
fn bundled_rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(RuleSet::bundled)
}

/// What the tool does with a bundle once loaded: analyse, render, and write it back out.
fn consume(bundle: &EvidenceBundle) {
    let d = crate::engine::analyze(
        bundle,
        bundled_rules(),
        &Settings::default(),
        &Filter::default(),
    );
    let opts = crate::report::RenderOptions {
        width: Some(80),
        ..crate::report::RenderOptions::default()
    };
    let mut out = Vec::new();
    let _ = crate::report::table::render(&d, &opts, &mut out);
    let _ = crate::report::json::render(&d, &mut out);
    let json = serde_json::to_string(bundle).expect("a bundle serialises to JSON");
    if let Err(e) = crate::bundle::load_bundle_str(&json, INPUT_NAME) {
        panic!("a bundle written as JSON does not load back: {e}");
    }
}

fn bundle(data: &[u8]) -> Outcome {
    let Some(t) = text(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    match crate::bundle::load_bundle_str(t, INPUT_NAME) {
        Ok(b) => {
            consume(&b);
            Outcome::Accepted(b.api_services.len() + b.webhooks.len() + b.probes.len())
        }
        Err(e) => refused(e.to_string(), data.len(), Some(INPUT_NAME)),
    }
}

fn raw_import(data: &[u8]) -> Outcome {
    let now = jiff::Timestamp::from_second(1_767_225_600).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let name = format!("dir/{INPUT_NAME}.txt");
    // Accepted when either reading accepts it: a file that only complements others (a status
    // table) gives nothing alone inside a directory, yet is read when named.
    let mut accepted = None;
    let mut refusal = None;
    for in_directory in [false, true] {
        let opts = crate::bundle::raw::ImportOptions::default();
        match crate::bundle::raw::import_bytes(data, &name, in_directory, now, opts) {
            Ok(b) => {
                consume(&b);
                accepted = Some(b.probes.len() + b.api_services.len());
            }
            Err(e) => refusal = Some(refused(e.to_string(), data.len(), Some(INPUT_NAME))),
        }
    }
    accepted.map_or_else(
        || refusal.unwrap_or(Outcome::Accepted(0)),
        Outcome::Accepted,
    )
}

fn pem(data: &[u8]) -> Outcome {
    // The DER path directly too: the fuzzer reaches X.509 structure faster without base64.
    let der = crate::pki::decode_der(data, 0);
    match crate::pki::decode_pem(data) {
        Err(_) if der.is_ok() => Outcome::Accepted(1),
        Ok(certs) => {
            for (info, der) in &certs {
                let _ = crate::pki::der_to_pem(der);
                assert_eq!(info.sha256.len(), 64);
            }
            Outcome::Accepted(certs.len())
        }
        Err(e) => refused(e.to_string(), data.len(), None),
    }
}

fn rules(data: &[u8]) -> Outcome {
    thread_local! {
        static WORLD: RefCell<Option<SampleWorld>> = const { RefCell::new(None) };
    }
    let Some(t) = text(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    // A rule's id must be its file's name: name the file after the id the input gives, so the
    // fuzzer gets past that check to the CEL behind it.
    let id = t
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .map(|v| v.trim().trim_matches('"'))
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let name = format!("{}.yaml", id.unwrap_or(INPUT_NAME));
    WORLD.with(|w| {
        let mut w = w.borrow_mut();
        let world = w.get_or_insert_with(SampleWorld::new);
        match crate::engine::rules::load::load_one_all(&name, t, false, world) {
            Ok(_) => Outcome::Accepted(1),
            Err(errors) => {
                assert!(!errors.is_empty(), "a refused rule file with no error");
                let mut last = Outcome::Accepted(0);
                for e in errors {
                    last = refused(e.to_string(), data.len(), Some(&name));
                }
                last
            }
        }
    })
}

fn scenario(data: &[u8]) -> Outcome {
    let Some(t) = text(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    match crate::refserver::scenario::load_str(t, INPUT_NAME) {
        Ok(s) => {
            let _ = s.clock();
            Outcome::Accepted(s.backends.len() + s.objects.len())
        }
        Err(e) => refused(e.to_string(), data.len(), Some(INPUT_NAME)),
    }
}

fn waivers(data: &[u8]) -> Outcome {
    use crate::engine::diagnosis::{Subject, SubjectKind};
    let Some(t) = text(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    match crate::engine::waivers::parse_waivers(t, INPUT_NAME) {
        Ok(w) => {
            // Globs are matched against names the fuzzer chooses too: the whole input, and each
            // pattern's own text, which it must match (a `*` covers the run `*`).
            for waiver in &w.waivers {
                let subject = |name: &str| {
                    Subject::new(waiver.subject.kind.unwrap_or(SubjectKind::ApiService), name)
                };
                let _ = waiver.subject.matches(&subject(t));
                assert!(
                    waiver.subject.matches(&subject(&waiver.subject.name)),
                    "pattern {:?} does not match its own text",
                    waiver.subject.name
                );
            }
            Outcome::Accepted(w.waivers.len())
        }
        Err(e) => refused(e.to_string(), data.len(), Some(INPUT_NAME)),
    }
}
