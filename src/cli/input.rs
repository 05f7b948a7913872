//! Reading a FILE named on the command line the way kubectl's `-f` does: `-` is stdin, a regular
//! file is read, and nothing ever waits forever.
//!
//! * `-` reads stdin to its end — unless stdin is a terminal: nobody types a bundle, and a command
//!   waiting on a terminal looks hung. `kubectl extpath collect | kubectl extpath analyze -` is the
//!   use.
//! * A FIFO (`analyze <(kubectl extpath collect)`, or one made with `mkfifo`) and a character device
//!   (`/dev/stdin`) are read like stdin. Opening a FIFO blocks until something opens it for writing,
//!   so the open runs on its own thread and is given [`WRITER_WAIT`]: a FIFO nobody writes to is an
//!   error that says so, not a hang. A terminal device is refused, as for `-`.
//! * A directory is refused with the command that reads one (`--raw DIR`), and sockets and other
//!   kinds with what they are.
//! * Whatever is read is bounded by [`MAX_INPUT_BYTES`] (`/dev/zero` ends too).
//!
//! Errors are one line naming the file ([`InputError`]); the CLI maps them to exit code 2. What
//! this file does not own: what the bytes mean (the bundle and waiver loaders parse them).

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a FIFO may wait for a writer before it is refused.
pub const WRITER_WAIT: Duration = Duration::from_secs(10);

/// The most a FILE may hold. The largest bundles measured (500 APIServices, 2,000 CRDs, two 30 MB
/// scrapes) are well under it.
pub const MAX_INPUT_BYTES: u64 = 512 * 1024 * 1024;

/// A FILE argument that could not be read. Every variant names it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A directory where a file was expected.
    #[error("{path}: is a directory; to read the raw incident files in it, use --raw {path}")]
    Directory {
        /// As given.
        path: String,
    },
    /// Stdin (or the device named) is a terminal.
    #[error(
        "{path}: is a terminal, not a bundle; pipe one in, e.g. kubectl extpath collect | kubectl extpath analyze -"
    )]
    Terminal {
        /// As given (`-` for stdin).
        path: String,
    },
    /// A FIFO that nobody opened for writing in time.
    #[error(
        "{path}: a FIFO that nothing wrote to within {secs} s; start the command that writes into it first, or pipe the bundle into `-`"
    )]
    NoWriter {
        /// As given.
        path: String,
        /// The wait, in seconds.
        secs: u64,
    },
    /// More than [`MAX_INPUT_BYTES`].
    #[error("{path}: more than {limit} MiB; that is not a bundle")]
    TooLarge {
        /// As given.
        path: String,
        /// The limit in MiB.
        limit: u64,
    },
    /// A socket or another kind of file that cannot be read as a stream.
    #[error("{path}: is a {kind}, not a file; give a file, a FIFO, or `-` for stdin")]
    Unsupported {
        /// As given.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// The operating system refused.
    #[error("{path}: cannot read: {reason}")]
    Io {
        /// As given.
        path: String,
        /// The OS error.
        reason: String,
    },
}

/// What a FILE argument holds, and the name to use for it in messages (`-` is `(stdin)`).
#[derive(Debug)]
pub struct Input {
    /// For messages: the path as given, or `(stdin)`.
    pub shown: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Read a FILE argument: `-` for stdin, a regular file, a FIFO or a character device.
///
/// # Errors
/// [`InputError`] naming the file: a directory, a terminal, a FIFO without a writer, too large, or
/// an OS error.
pub fn read_input(path: &Path) -> Result<Input, InputError> {
    let shown = path.display().to_string();
    if path.as_os_str() == "-" {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Err(InputError::Terminal { path: "-".into() });
        }
        let bytes = read_bounded(stdin.lock(), &shown)?;
        return Ok(Input {
            shown: "(stdin)".into(),
            bytes,
        });
    }
    let io = |e: std::io::Error| InputError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    };
    // metadata() follows symlinks (`/dev/stdin`, `/dev/fd/63`) and never blocks.
    let meta = std::fs::metadata(path).map_err(io)?;
    let ty = meta.file_type();
    if ty.is_file() {
        let file = std::fs::File::open(path).map_err(io)?;
        let bytes = read_bounded(file, &shown)?;
        return Ok(Input { shown, bytes });
    }
    if ty.is_dir() {
        return Err(InputError::Directory { path: shown });
    }
    use std::os::unix::fs::FileTypeExt;
    if ty.is_fifo() || ty.is_char_device() {
        let bytes = read_stream(path.to_path_buf(), &shown)?;
        return Ok(Input { shown, bytes });
    }
    let kind = if ty.is_socket() {
        "socket"
    } else if ty.is_block_device() {
        "block device"
    } else {
        "special file"
    };
    Err(InputError::Unsupported { path: shown, kind })
}

/// Check a `--raw` PATH without reading it: a file or a directory (the raw importer reads those);
/// anything else is refused here, before an open could block.
///
/// # Errors
/// [`InputError`] naming the path.
pub fn check_raw_path(path: &Path) -> Result<(), InputError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| InputError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    if meta.is_file() || meta.is_dir() {
        return Ok(());
    }
    use std::os::unix::fs::FileTypeExt;
    let kind = if meta.file_type().is_fifo() {
        "FIFO (raw import reads files and directories; save its output to a file first)"
    } else if meta.file_type().is_socket() {
        "socket"
    } else {
        "device"
    };
    Err(InputError::Unsupported { path: shown, kind })
}

/// Read to the end, at most [`MAX_INPUT_BYTES`].
fn read_bounded(reader: impl Read, shown: &str) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::Io {
            path: shown.to_string(),
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(InputError::TooLarge {
            path: shown.to_string(),
            limit: MAX_INPUT_BYTES / (1024 * 1024),
        });
    }
    Ok(bytes)
}

/// A FIFO or a device: opened on a thread (opening a FIFO waits for a writer), given
/// [`WRITER_WAIT`] to open, then read to the end like stdin.
fn read_stream(path: PathBuf, shown: &str) -> Result<Vec<u8>, InputError> {
    let (opened_tx, opened_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let name = shown.to_string();
    std::thread::spawn(move || {
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                let _ = opened_tx.send(Err(InputError::Io {
                    path: name,
                    reason: e.to_string(),
                }));
                return;
            }
        };
        if file.is_terminal() {
            let _ = opened_tx.send(Err(InputError::Terminal { path: name }));
            return;
        }
        let _ = opened_tx.send(Ok(()));
        let _ = done_tx.send(read_bounded(file, &name));
    });
    match opened_rx.recv_timeout(WRITER_WAIT) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        // The thread stays blocked in open(2); the process exits with this error soon after.
        Err(_) => {
            return Err(InputError::NoWriter {
                path: shown.to_string(),
                secs: WRITER_WAIT.as_secs(),
            });
        }
    }
    // Once a writer is there, reading waits for it to finish, as `cat` would.
    done_rx.recv().map_err(|_| InputError::Io {
        path: shown.to_string(),
        reason: "the reader stopped".into(),
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_directories_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("b.yaml");
        std::fs::write(&file, "kind: EvidenceBundle\n").expect("write");
        let input = read_input(&file).expect("a regular file reads");
        assert_eq!(input.bytes, b"kind: EvidenceBundle\n");
        assert_eq!(input.shown, file.display().to_string());
        let err = read_input(dir.path()).expect_err("a directory is not a bundle");
        assert!(
            err.to_string()
                .ends_with(&format!("use --raw {}", dir.path().display())),
            "{err}"
        );
        let missing = read_input(&dir.path().join("nope")).expect_err("missing");
        assert!(matches!(missing, InputError::Io { .. }), "{missing}");
    }

    #[test]
    fn character_devices_read_like_stdin_and_are_bounded() {
        let empty = read_input(Path::new("/dev/null")).expect("/dev/null reads as empty");
        assert!(empty.bytes.is_empty());
        let raw = check_raw_path(Path::new("/dev/null")).expect_err("not a raw file");
        assert!(raw.to_string().contains("device"), "{raw}");
    }
}
