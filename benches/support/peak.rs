//! Peak resident memory, of this process or of a child run to its end. Each bench uses the part
//! it needs.
//!
//! Not `wait4`'s or `getrusage(RUSAGE_CHILDREN)`'s `ru_maxrss`: on Linux a child spawned by
//! vfork/exec (what `std::process::Command` does) starts its `maxrss` at the peak of the process
//! it was spawned from, and the benches host reference servers of hundreds of megabytes in that
//! process. The child's `VmHWM` in `/proc/<pid>/status` is its own, read every few milliseconds
//! until it exits.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished child did.
pub struct Finished {
    pub wall: Duration,
    pub code: i32,
    pub stdout: Vec<u8>,
    /// Peak resident memory of the child itself, in KB.
    pub peak_kb: u64,
}

/// This process's own peak resident memory, in MB.
pub fn own_mb() -> f64 {
    #[allow(clippy::cast_precision_loss)]
    vm_hwm_kb("self").map_or(0.0, |kb| kb as f64 / 1024.0)
}

/// CPU time this process has used so far, user and system, over all its threads (from
/// `/proc/self/stat`, in clock ticks of 10 ms). On a shared machine it moves less with other
/// people's load than wall time does.
pub fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

/// `VmHWM` of `/proc/<pid>/status` (`pid` may be `self`), in KB.
fn vm_hwm_kb(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Run `cmd` (stdout captured, stderr dropped) and measure it.
pub fn run(cmd: &mut Command) -> Finished {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("command starts");
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let pid = child.id();
    let mut peak_kb = 0;
    // `try_wait` reaps the child only once it has exited, so until then the pid is the child's.
    let status = loop {
        peak_kb = peak_kb.max(vm_hwm_kb(&pid.to_string()).unwrap_or(0));
        if let Some(status) = child.try_wait().expect("child waits") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Finished {
        wall: started.elapsed(),
        code: status.code().unwrap_or(-1),
        stdout: reader.join().expect("stdout reads"),
        peak_kb,
    }
}
