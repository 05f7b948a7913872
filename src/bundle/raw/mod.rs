//! `import --raw`: build an [`EvidenceBundle`] from the raw files an on-call engineer already has.
//!
//! Input is any mix of files and directories (walked recursively, in sorted order): `kubectl get -o
//! json|yaml` output, `/metrics` dumps of kube-apiserver and etcd, PEM certificates, kubectl stderr
//! and `-v6` traces, curl output, readyz/livez listings, APF debug dumps, watch streams, result lists
//! of repeated requests, and log excerpts (with kube-apiserver's `Trace[…]` blocks and etcd's `took
//! too long` warnings as timed hops). `docs/raw-import.md` lists every kind, how it is recognised
//! and what it becomes.
//!
//! The rules this module keeps:
//! * **Content decides the kind, never the name** (`detect`). The only use of a file name is to
//!   pair a lone curl body with its headers/status file of the same stem, as a fallback.
//! * **Nothing secret is kept**: Secrets are never deserialised, request headers of traces are
//!   skipped, PEM private keys are never decoded, and only chosen fields reach the bundle.
//! * **One file never sinks a folder**: inside a directory, a file that cannot be read as the kind
//!   its content shows (malformed, cut short, unreadable, too large, invalid UTF-8) — or an item of
//!   one (a List's object, a ConfigMap's PEM value) — becomes an `unreadable` gap naming the file,
//!   the line and the reason, and whatever else could be read is kept. A file named on the command
//!   line, and every file under [`ImportOptions::strict`] (`--strict`), is held to the letter: its
//!   first problem is a [`RawImportError`], one line `file:line: message`. A directory with nothing
//!   usable is an error too.
//! * **Time comes from the evidence**: `collection.collected_at` is the latest time the files carry
//!   (`timeline`), and certificates are verified at that time.
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
mod timed_hops;
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
    /// A file is not text (NUL bytes), or a text file holds bytes that are not UTF-8.
    #[error("{path}{}: not a text file (invalid UTF-8 at byte {offset})", line_suffix(*.line))]
    NotText {
        /// The file.
        path: String,
        /// 1-based line of the first bad byte, when the file is otherwise text.
        line: Option<usize>,
        /// First byte that is not UTF-8.
        offset: usize,
    },
    /// A file is larger than extpath reads into memory.
    #[error("{path}: too large to import ({size} bytes; the limit is {limit})")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
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
    #[error("{path}: no usable file in this directory ({files} file(s){why})")]
    NothingUsable {
        /// The directory.
        path: String,
        /// Files seen.
        files: usize,
        /// What became of them: `, none of a kind extpath imports`, or the first file that could
        /// not be read.
        why: String,
    },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map_or(String::new(), |l| format!(":{l}"))
}

/// Files larger than this are refused rather than read into memory (metrics dumps are streamed
/// and have no limit).
pub const MAX_TEXT_BYTES: u64 = 256 * 1024 * 1024;
/// How much of a file is read to decide whether it is a metrics dump.
const SNIFF_BYTES: usize = 16 * 1024;

/// How an import treats files that cannot be read as their kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    /// Every file — inside a directory too — is held to the rule for files named on the command
    /// line: its first problem (malformed, cut short, unreadable, too large, invalid UTF-8) is an
    /// error. Without it, such a file inside a directory is an `unreadable` gap (`--strict`).
    pub strict: bool,
    /// Text files larger than this are not read ([`MAX_TEXT_BYTES`] unless a test lowers it).
    pub max_text_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            strict: false,
            max_text_bytes: MAX_TEXT_BYTES,
        }
    }
}

/// Build a bundle from raw files and directories.
///
/// # Errors
/// [`RawImportError`] for an unreadable path, a file named explicitly that is empty, not text, of
/// no known kind or malformed, or a directory with no usable file.
pub fn import_paths(paths: &[PathBuf]) -> Result<EvidenceBundle, RawImportError> {
    import_paths_with(paths, jiff::Timestamp::now(), ImportOptions::default())
}

/// [`import_paths`] with the import time given (it is the collection time of undated evidence).
///
/// # Errors
/// As [`import_paths`].
pub fn import_paths_at(
    paths: &[PathBuf],
    now: jiff::Timestamp,
) -> Result<EvidenceBundle, RawImportError> {
    import_paths_with(paths, now, ImportOptions::default())
}

/// [`import_paths_at`] with options (`--strict`).
///
/// # Errors
/// As [`import_paths`]; under `strict`, also any file inside a directory that cannot be read as
/// its kind.
pub fn import_paths_with(
    paths: &[PathBuf],
    now: jiff::Timestamp,
    opts: ImportOptions,
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
            import_dir(&mut imp, path, shown, opts)?;
        } else {
            imp.lenient = false;
            import_file(&mut imp, path, true, opts)?;
        }
    }
    Ok(finish::assemble(imp, now))
}

/// Import every file under a directory named on the command line. A file (or subdirectory) that
/// cannot be read is a gap unless `strict`; a directory that gave nothing is an error.
fn import_dir(
    imp: &mut Importer,
    path: &Path,
    shown: &str,
    opts: ImportOptions,
) -> Result<(), RawImportError> {
    let mut files = Vec::new();
    let mut problems: Vec<RawImportError> = Vec::new();
    walk(path, true, &mut files, &mut problems)?;
    if opts.strict && !problems.is_empty() {
        return Err(problems.remove(0));
    }
    for p in &problems {
        imp.unreadable(p);
    }
    let mut used = 0;
    let mut failed: Vec<RawImportError> = Vec::new();
    for f in &files {
        imp.lenient = !opts.strict;
        let gaps_before = imp.bundle.gaps.len();
        match import_file(imp, f, false, opts) {
            Ok(true) => used += 1,
            Ok(false) => {}
            Err(e) if !opts.strict => {
                // Evidence the reader took before it met the problem stays; the file is a gap.
                imp.bundle.gaps.truncate(gaps_before);
                imp.unreadable(&e);
                failed.push(e);
            }
            Err(e) => return Err(e),
        }
    }
    if used == 0 {
        let why = match failed.first().or(problems.first()) {
            Some(e) => format!(
                ", {} could not be read, the first: {e}",
                failed.len() + problems.len()
            ),
            None => ", none of a kind extpath imports".to_string(),
        };
        return Err(RawImportError::NothingUsable {
            path: shown.to_string(),
            files: files.len(),
            why,
        });
    }
    Ok(())
}

/// Every file under `dir`, sorted by path. Symlinked directories are not followed (no loops). A
/// subdirectory or entry that cannot be read is a problem of its own; only `dir` itself, when it
/// was named on the command line (`top`), is an error.
fn walk(
    dir: &Path,
    top: bool,
    out: &mut Vec<PathBuf>,
    problems: &mut Vec<RawImportError>,
) -> Result<(), RawImportError> {
    let io = |e: std::io::Error| RawImportError::Io {
        path: dir.display().to_string(),
        reason: e.to_string(),
    };
    let read = std::fs::read_dir(dir).and_then(|entries| entries.collect::<Result<Vec<_>, _>>());
    let mut entries = match read {
        Ok(entries) => entries,
        Err(e) if top => return Err(io(e)),
        Err(e) => {
            problems.push(io(e));
            return Ok(());
        }
    };
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let ty = match e.file_type() {
            Ok(ty) => ty,
            Err(err) => {
                problems.push(RawImportError::Io {
                    path: path.display().to_string(),
                    reason: err.to_string(),
                });
                continue;
            }
        };
        if ty.is_dir() {
            walk(&path, false, out, problems)?;
        } else if ty.is_file() || (ty.is_symlink() && path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// Import one file; `Ok(true)` when it gave evidence.
fn import_file(
    imp: &mut Importer,
    path: &Path,
    explicit: bool,
    opts: ImportOptions,
) -> Result<bool, RawImportError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| RawImportError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let ctx = FileCtx {
        shown,
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        stem: curl_stem(path),
    };
    import_source(imp, ctx, file, size, explicit, opts)
}

/// The fuzzing entry point of the raw importer: import one file's `bytes` as if a file named
/// `name` held them — every kind detector and reader behind [`import_paths_with`] runs, and the
/// bundle is assembled at `now`. With `in_directory`, the bytes are treated as a file found inside
/// a directory named on the command line (lenient unless `opts.strict`, and a file of no known
/// kind is skipped); without it, as a file named on the command line (held to the letter).
///
/// # Errors
/// As [`import_paths_with`] for that one file.
pub fn import_bytes(
    bytes: &[u8],
    name: &str,
    in_directory: bool,
    now: jiff::Timestamp,
    opts: ImportOptions,
) -> Result<EvidenceBundle, RawImportError> {
    let path = Path::new(name);
    let mut imp = Importer::new(EvidenceBundle::new(CollectionSource::Raw {
        paths: vec![name.to_string()],
    }));
    imp.lenient = in_directory && !opts.strict;
    let ctx = FileCtx {
        shown: name.to_string(),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        stem: curl_stem(path),
    };
    let size = bytes.len() as u64;
    let used = import_source(&mut imp, ctx, bytes, size, !in_directory, opts)?;
    if in_directory && !used {
        return Err(RawImportError::NothingUsable {
            path: name.to_string(),
            files: 1,
            why: ", none of a kind extpath imports".to_string(),
        });
    }
    Ok(finish::assemble(imp, now))
}

/// Import what `source` (of `size` bytes) holds; `Ok(true)` when it gave evidence.
fn import_source<R: Read>(
    imp: &mut Importer,
    ctx: FileCtx,
    mut file: R,
    size: u64,
    explicit: bool,
    opts: ImportOptions,
) -> Result<bool, RawImportError> {
    let shown = ctx.shown.clone();
    let io = |e: std::io::Error| RawImportError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    };
    let mut head = vec![0u8; SNIFF_BYTES];
    let n = read_up_to(&mut file, &mut head).map_err(io)?;
    head.truncate(n);
    let complete = size as usize == n;
    if head.iter().all(u8::is_ascii_whitespace) && complete {
        if explicit {
            return Err(RawImportError::Empty { path: shown });
        }
        return Ok(false);
    }
    if let Err(offset) = text_prefix(&head, complete) {
        let textual = looks_textual(&head);
        if !textual && !explicit {
            imp.skipped(&shown, "not a text file");
            return Ok(false);
        }
        // A text file with a stray byte (a log cut mid-character, a Latin-1 name) is read below,
        // the bad bytes replaced, when one file may not sink the folder.
        if !textual || !imp.lenient {
            return Err(RawImportError::NotText {
                path: shown,
                line: textual.then(|| line_of(&head, offset)),
                offset,
            });
        }
    }
    let head_text = std::str::from_utf8(&head)
        .unwrap_or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default());
    if detect::is_metrics(head_text) {
        let reader = BufReader::new(std::io::Cursor::new(head).chain(file));
        let result = metrics_dump::read(imp, &ctx, reader);
        return finish_file(imp, &ctx, result);
    }
    if size > opts.max_text_bytes {
        return Err(RawImportError::TooLarge {
            path: shown,
            size,
            limit: opts.max_text_bytes,
        });
    }
    let mut bytes = head;
    file.read_to_end(&mut bytes).map_err(io)?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            if !imp.lenient {
                return Err(RawImportError::NotText {
                    path: shown,
                    line: Some(line_of(&bytes, offset)),
                    offset,
                });
            }
            imp.unreadable(&RawImportError::Malformed {
                path: shown.clone(),
                line: Some(line_of(&bytes, offset)),
                message: format!(
                    "invalid UTF-8 at byte {offset}; read with the bad bytes replaced"
                ),
            });
            String::from_utf8_lossy(&bytes).into_owned()
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

/// 1-based line of byte `offset`.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Whether a prefix that is not clean UTF-8 is still text with a few bad bytes (no NUL, and
/// almost all of it UTF-8), rather than a binary file.
fn looks_textual(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    let good = String::from_utf8_lossy(head)
        .chars()
        .filter(|&c| c != char::REPLACEMENT_CHARACTER)
        .count();
    let bad = String::from_utf8_lossy(head)
        .chars()
        .filter(|&c| c == char::REPLACEMENT_CHARACTER)
        .count();
    good > 0 && bad * 100 <= good
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn read_up_to<R: Read>(file: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
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
