//! `import --raw`: build an [`EvidenceBundle`] from the raw files an on-call engineer already has.
//!
//! Input is any mix of files and directories (walked recursively, in sorted order): `kubectl get -o
//! json|yaml` output, `/metrics` dumps of kube-apiserver and etcd, PEM certificates, kubectl stderr
//! and `-v6` traces, curl output, readyz/livez listings, APF debug dumps, watch streams, result lists
//! of repeated requests, and log excerpts. `docs/raw-import.md` lists every kind, how it is
//! recognised and what it becomes.
//!
//! The rules this module keeps:
//! * **Content decides the kind, never the name** ([`detect`]). The only use of a file name is to
//!   pair a lone curl body with its headers/status file of the same stem, as a fallback.
//! * **Nothing secret is kept**: Secrets are never deserialised, request headers of traces are
//!   skipped, PEM private keys are never decoded, and only chosen fields reach the bundle.
//! * **Bad input is one line**: a file named explicitly that is of no known kind, a malformed file of
//!   a known kind, or a directory with nothing usable is a [`RawImportError`] naming the file (and
//!   line); inside a directory an unknown file is only a `skipped` gap.
//! * **Time comes from the evidence**: `collection.collected_at` is the latest time the files carry
//!   ([`timeline`]), and certificates are verified at that time.
//!
//! What it does not own: the bundle types (`bundle`), judging anything (`engine`).

mod apf_dump;
mod cert_check;
mod curl;
mod detect;
mod events;
mod finish;
mod health;
mod kube_objects;
mod kubectl_stderr;
mod kubectl_trace;
mod log_lines;
mod log_patterns;
mod logs;

pub use events::probes_from_event;
pub use logs::container_log_findings;
mod metrics_dump;
mod object_mapping;
mod pem;
mod result_list;
mod state;
mod status_table;
mod status_text;
mod targets;
mod timeline;
mod trailer;
mod watch_stream;

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::bundle::{CollectionSource, EvidenceBundle};

use detect::{Detected, Kind};
use state::{FileCtx, FileError, Importer, Yield};

/// Why raw files could not be imported. `Display` is one line naming the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum RawImportError {
    /// No path was given.
    #[error("no file or directory given")]
    NoPaths,
    /// A path could not be read.
    #[error("{path}: cannot read: {reason}")]
    Io {
        /// The path.
        path: String,
        /// OS error text.
        reason: String,
    },
    /// A file named explicitly is empty.
    #[error("{path}: empty file")]
    Empty {
        /// The file.
        path: String,
    },
    /// A file named explicitly is not text.
    #[error("{path}: not a text file (invalid UTF-8 at byte {offset})")]
    NotText {
        /// The file.
        path: String,
        /// First byte that is not UTF-8.
        offset: usize,
    },
    /// A file named explicitly is of no kind extpath imports.
    #[error("{path}: not a kind of file extpath imports: {reason}")]
    UnknownKind {
        /// The file.
        path: String,
        /// What it looked like.
        reason: String,
    },
    /// A file of a known kind is malformed.
    #[error("{path}{}: {message}", line_suffix(*.line))]
    Malformed {
        /// The file.
        path: String,
        /// 1-based line, when the problem has one.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// A directory held no file that gave evidence.
    #[error(
        "{path}: no usable file in this directory ({files} file(s), none of a kind extpath imports)"
    )]
    NothingUsable {
        /// The directory.
        path: String,
        /// Files seen.
        files: usize,
    },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map_or(String::new(), |l| format!(":{l}"))
}

/// Files larger than this are refused rather than read into memory (metrics dumps are streamed
/// and have no limit).
const MAX_TEXT_BYTES: u64 = 256 * 1024 * 1024;
/// How much of a file is read to decide whether it is a metrics dump.
const SNIFF_BYTES: usize = 16 * 1024;

/// Build a bundle from raw files and directories.
///
/// # Errors
/// [`RawImportError`] for an unreadable path, a file named explicitly that is empty, not text or of
/// no known kind, a malformed file of a known kind, or a directory with no usable file.
pub fn import_paths(paths: &[PathBuf]) -> Result<EvidenceBundle, RawImportError> {
    import_paths_at(paths, jiff::Timestamp::now())
}

/// [`import_paths`] with the import time given (it is the collection time of undated evidence).
///
/// # Errors
/// As [`import_paths`].
pub fn import_paths_at(
    paths: &[PathBuf],
    now: jiff::Timestamp,
) -> Result<EvidenceBundle, RawImportError> {
    if paths.is_empty() {
        return Err(RawImportError::NoPaths);
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut imp = Importer::new(EvidenceBundle::new(CollectionSource::Raw {
        paths: shown.clone(),
    }));
    for (path, shown) in paths.iter().zip(&shown) {
        let meta = std::fs::metadata(path).map_err(|e| RawImportError::Io {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        if meta.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files)?;
            let mut used = 0;
            for f in &files {
                if import_file(&mut imp, f, false)? {
                    used += 1;
                }
            }
            if used == 0 {
                return Err(RawImportError::NothingUsable {
                    path: shown.clone(),
                    files: files.len(),
                });
            }
        } else {
            import_file(&mut imp, path, true)?;
        }
    }
    Ok(finish::assemble(imp, now))
}

/// Every file under `dir`, sorted by path. Symlinked directories are not followed (no loops).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RawImportError> {
    let io = |e: std::io::Error| RawImportError::Io {
        path: dir.display().to_string(),
        reason: e.to_string(),
    };
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let ty = e.file_type().map_err(io)?;
        let path = e.path();
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file() || (ty.is_symlink() && path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// Import one file; `Ok(true)` when it gave evidence.
fn import_file(imp: &mut Importer, path: &Path, explicit: bool) -> Result<bool, RawImportError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| RawImportError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut head = vec![0u8; SNIFF_BYTES];
    let n = read_up_to(&mut file, &mut head).map_err(io)?;
    head.truncate(n);
    let ctx = FileCtx {
        shown: shown.clone(),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        stem: curl_stem(path),
    };
    if head.iter().all(u8::is_ascii_whitespace) && size as usize == n {
        if explicit {
            return Err(RawImportError::Empty { path: shown });
        }
        return Ok(false);
    }
    if let Err(offset) = text_prefix(&head, size as usize == n) {
        if explicit {
            return Err(RawImportError::NotText {
                path: shown,
                offset,
            });
        }
        imp.skipped(&shown, "not a text file");
        return Ok(false);
    }
    let head_text = std::str::from_utf8(&head)
        .unwrap_or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default());
    if detect::is_metrics(head_text) {
        let reader = BufReader::new(std::io::Cursor::new(head).chain(file));
        let result = metrics_dump::read(imp, &ctx, reader);
        return finish_file(imp, &ctx, result);
    }
    if size > MAX_TEXT_BYTES {
        return Err(RawImportError::Malformed {
            path: shown,
            line: None,
            message: format!("too large to import ({size} bytes; the limit is {MAX_TEXT_BYTES})"),
        });
    }
    let mut bytes = head;
    file.read_to_end(&mut bytes).map_err(io)?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            if explicit {
                return Err(RawImportError::NotText {
                    path: shown,
                    offset,
                });
            }
            imp.skipped(&shown, "not a text file");
            return Ok(false);
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let kind = match detect::detect(text) {
        Detected::Known(k) => k,
        Detected::Unknown(reason) => {
            if explicit {
                return Err(RawImportError::UnknownKind {
                    path: shown,
                    reason,
                });
            }
            imp.skipped(&shown, reason);
            return Ok(false);
        }
    };
    let result = match kind {
        Kind::KubeObjects => kube_objects::read(imp, &ctx, text),
        Kind::ApiResponse | Kind::CurlOutput => curl::read_output(imp, &ctx, text),
        Kind::CurlResponse => curl::read_response(imp, &ctx, text),
        Kind::WatchStream => watch_stream::read(imp, &ctx, text),
        Kind::Metrics => metrics_dump::read(imp, &ctx, text.as_bytes()),
        Kind::Pem => pem::read(imp, &ctx, text),
        Kind::OpensslText => Ok(Yield::Consumed),
        Kind::KubectlTrace => kubectl_trace::read(imp, &ctx, text),
        Kind::KubectlStderr => kubectl_stderr::read(imp, &ctx, text),
        Kind::ResultList => result_list::read(imp, &ctx, text),
        Kind::Health => health::read(imp, &ctx, text),
        Kind::ApfDump => apf_dump::read(imp, &ctx, text),
        Kind::StatusTable => status_table::read(imp, &ctx, text),
        Kind::Log => logs::read(imp, &ctx, text),
    };
    finish_file(imp, &ctx, result)
}

fn finish_file(
    imp: &mut Importer,
    ctx: &FileCtx,
    result: Result<Yield, FileError>,
) -> Result<bool, RawImportError> {
    match result {
        Ok(Yield::Used) => Ok(true),
        Ok(Yield::Consumed) => Ok(false),
        Ok(Yield::Nothing(detail)) => {
            imp.skipped(&ctx.shown, detail);
            Ok(false)
        }
        Err(e) => Err(RawImportError::Malformed {
            path: ctx.shown.clone(),
            line: e.line,
            message: one_line(&e.message),
        }),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// `Ok` when the prefix is UTF-8 text (a character cut at the end of an incomplete read is fine);
/// `Err(offset)` of the first bad byte otherwise. NUL bytes mean binary.
fn text_prefix(head: &[u8], complete: bool) -> Result<(), usize> {
    let nul = head.iter().position(|&b| b == 0);
    let bad_utf8 = match std::str::from_utf8(head) {
        Ok(_) => None,
        Err(e) if e.error_len().is_none() && !complete => None,
        Err(e) => Some(e.valid_up_to()),
    };
    match (nul, bad_utf8) {
        (None, None) => Ok(()),
        (a, b) => Err(a.into_iter().chain(b).min().unwrap_or(0)),
    }
}

/// The stem curl parts of one request share: the file name without its extension and without a
/// trailing `-body`, `-headers` or `-status` (or `_`/`.` variants).
fn curl_stem(path: &Path) -> String {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for suffix in ["body", "headers", "header", "status", "hdr", "out", "err"] {
        for sep in ['-', '_', '.'] {
            if let Some(stem) = name.strip_suffix(&format!("{sep}{suffix}")) {
                return stem.to_string();
            }
        }
    }
    name
}
