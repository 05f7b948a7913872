//! The one bundle loader every command uses: parse, then validate.
//!
//! Phase one turns text into the typed model (JSON when the document starts with `{`, YAML
//! otherwise), rejecting unknown fields, with the file, line and column of the first problem. Phase two
//! checks what types cannot: the `apiVersion`/`kind`, and cross-field facts (one metrics source per
//! target, windows that end after they start). Either failure is a [`BundleError`] whose `Display` is
//! one line naming the file, which the CLI prints before exiting with code 2.

use std::path::Path;

use super::{API_VERSION, EvidenceBundle, KIND};

/// Why a bundle could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file could not be read.
    #[error("{path}: cannot read: {reason}")]
    Io {
        /// File.
        path: String,
        /// OS error text.
        reason: String,
    },
    /// Empty file.
    #[error("{path}: empty file, expected an EvidenceBundle")]
    Empty {
        /// File.
        path: String,
    },
    /// Not UTF-8 text.
    #[error("{path}: not a text file (invalid UTF-8 at byte {offset})")]
    NotText {
        /// File.
        path: String,
        /// First invalid byte.
        offset: usize,
    },
    /// Syntax or type error while parsing.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// File.
        path: String,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A well-formed document that is not an extpath bundle of this version.
    #[error("{path}: {message}")]
    WrongDocument {
        /// File.
        path: String,
        /// What it is instead.
        message: String,
    },
    /// Parsed, but inconsistent.
    #[error("{path}: {place}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// Where in the document (`metrics[1].target`).
        place: String,
        /// What is wrong.
        message: String,
    },
}

/// Load and validate a bundle file.
///
/// # Errors
/// [`BundleError`] naming the file (and line) of the first problem.
pub fn load_bundle(path: &Path) -> Result<EvidenceBundle, BundleError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| BundleError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| BundleError::NotText {
        path: shown.clone(),
        offset: e.valid_up_to(),
    })?;
    load_bundle_str(text, &shown)
}

/// Load and validate a bundle from text; `path` is only used in messages.
///
/// # Errors
/// [`BundleError`] naming `path` (and line) of the first problem.
pub fn load_bundle_str(text: &str, path: &str) -> Result<EvidenceBundle, BundleError> {
    if text.trim().is_empty() {
        return Err(BundleError::Empty {
            path: path.to_string(),
        });
    }
    let bundle = parse(text, path)?;
    validate(&bundle, path)?;
    Ok(bundle)
}

fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

fn parse(text: &str, path: &str) -> Result<EvidenceBundle, BundleError> {
    let typed = if is_json(text) {
        serde_json::from_str::<EvidenceBundle>(text).map_err(|e| BundleError::Parse {
            path: path.to_string(),
            line: e.line(),
            column: e.column(),
            message: strip_location(&e.to_string()),
        })
    } else {
        serde_saphyr::from_str_with_options::<EvidenceBundle>(text, yaml_options(text)).map_err(
            |e| {
                let (line, column) = yaml_location(&e);
                let message = super::yaml_limits::budget_sentence(&e, text.len())
                    .unwrap_or_else(|| strip_yaml_location(&first_line(&e.to_string())));
                BundleError::Parse {
                    path: path.to_string(),
                    line,
                    column,
                    message,
                }
            },
        )
    };
    match typed {
        Ok(b) => Ok(b),
        // A document of another kind fails on its first unfamiliar field; say what it is instead.
        Err(parse_err) => Err(identify(text, path).unwrap_or(parse_err)),
    }
}

/// When the document parses as a generic map whose `apiVersion`/`kind` are not ours, that is the
/// clearer message.
fn identify(text: &str, path: &str) -> Option<BundleError> {
    let value: serde_json::Value = if is_json(text) {
        serde_json::from_str(text).ok()?
    } else {
        serde_saphyr::from_str_with_options(text, yaml_options(text)).ok()?
    };
    let obj = value.as_object()?;
    let api_version = obj.get("apiVersion").and_then(|v| v.as_str());
    let kind = obj.get("kind").and_then(|v| v.as_str());
    check_type(api_version.unwrap_or(""), kind.unwrap_or(""), path).err()
}

fn check_type(api_version: &str, kind: &str, path: &str) -> Result<(), BundleError> {
    if kind != KIND || api_version != API_VERSION {
        let what = match (api_version, kind) {
            ("", "") => "a document without apiVersion/kind".to_string(),
            (a, k) => format!("apiVersion {a:?}, kind {k:?}"),
        };
        let hint =
            if kind.ends_with("List") || api_version == "v1" || api_version.contains(".k8s.io") {
                " (a Kubernetes object: use `import --raw` for kubectl output)"
            } else {
                ""
            };
        return Err(BundleError::WrongDocument {
            path: path.to_string(),
            message: format!(
                "expected apiVersion {API_VERSION:?}, kind {KIND:?}, found {what}{hint}"
            ),
        });
    }
    Ok(())
}

/// Limits that grow with the file, so that every bundle the tool writes loads back
/// ([`super::yaml_limits`]).
fn yaml_options(text: &str) -> serde_saphyr::Options {
    super::yaml_limits::options_for(text.len())
}

fn yaml_location(e: &serde_saphyr::Error) -> (usize, usize) {
    e.location()
        .map(|l| (l.line() as usize, l.column() as usize))
        .unwrap_or((0, 0))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// serde-saphyr prefixes its messages with `error: line L column C: `; the location is already
/// in `file:line:column`, so say it once.
fn strip_yaml_location(s: &str) -> String {
    let s = s.strip_prefix("error: ").unwrap_or(s);
    if let Some(rest) = s.strip_prefix("line ")
        && let Some((_, msg)) = rest.split_once(": ")
        && rest
            .split(':')
            .next()
            .is_some_and(|loc| loc.contains(" column "))
    {
        return msg.to_string();
    }
    s.to_string()
}

fn strip_location(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// Phase two: what the types cannot express.
fn validate(b: &EvidenceBundle, path: &str) -> Result<(), BundleError> {
    check_type(&b.api_version, &b.kind, path)?;
    let invalid = |place: String, message: String| BundleError::Invalid {
        path: path.to_string(),
        place,
        message,
    };
    let mut seen = std::collections::HashSet::new();
    for (i, m) in b.metrics.iter().enumerate() {
        if !seen.insert(m.target) {
            return Err(invalid(
                format!("metrics[{i}].target"),
                format!("a second metrics source for target {:?}", m.target.as_str()),
            ));
        }
        if let Some(w) = &m.window
            && w.end < w.start
        {
            return Err(invalid(
                format!("metrics[{i}].window"),
                "window ends before it starts".into(),
            ));
        }
    }
    if let Some(w) = &b.collection.metrics_window
        && w.end < w.start
    {
        return Err(invalid(
            "collection.metrics_window".into(),
            "window ends before it starts".into(),
        ));
    }
    for (i, a) in b.api_services.iter().enumerate() {
        if a.name.is_empty() {
            return Err(invalid(
                format!("api_services[{i}].name"),
                "empty name".into(),
            ));
        }
    }
    for (i, w) in b.webhooks.iter().enumerate() {
        if w.name.is_empty() {
            return Err(invalid(format!("webhooks[{i}].name"), "empty name".into()));
        }
        if !(1..=30).contains(&w.effective_timeout_seconds) {
            return Err(invalid(
                format!("webhooks[{i}].effective_timeout_seconds"),
                format!(
                    "{} is outside 1..=30, the range the API server accepts",
                    w.effective_timeout_seconds
                ),
            ));
        }
    }
    Ok(())
}
