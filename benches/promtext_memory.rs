//! Peak memory of parsing the generated 30 MB dump from a file, as a fraction of the dump size.
//!
//! Each variant runs in a fresh child process (this binary re-run with `--child`), so its peak
//! RSS (`VmHWM` in /proc/self/status) is its own: read once before parsing (the process floor)
//! and once after. The parent writes the dump to a temporary file by streaming the generator, so
//! no variant starts with the dump in memory.
//!
//! A counting global allocator also reports the peak of live heap bytes during the parse: what
//! the parser holds, as opposed to what the allocator keeps resident around it.
//!
//! Run: `cargo bench --bench promtext_memory` (Linux only: it reads /proc).

#[path = "promtext_dump.rs"]
mod promtext_dump;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, BufWriter};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use extpath::promtext::{Selection, parse_reader};

const VARIANTS: [&str; 3] = ["rules-selection", "select-all", "prometheus-parse"];

/// Counts live heap bytes and their peak, to tell what the parse holds from what the allocator
/// keeps resident around it.
struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only counters are added.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Peak resident set size so far, in bytes.
fn vm_hwm() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line");
    kb * 1024
}

fn child(variant: &str, path: &Path) {
    let before = vm_hwm();
    let heap_before = LIVE.load(Ordering::Relaxed);
    PEAK.store(heap_before, Ordering::Relaxed);
    let file = std::fs::File::open(path).expect("the dump");
    let reader = BufReader::with_capacity(64 * 1024, file);
    let series = match variant {
        "rules-selection" => {
            let sel = Selection::names(promtext_dump::RULES_SELECTION);
            let fams = parse_reader(reader, &sel).expect("parses");
            fams.iter().map(|f| f.series.len()).sum::<usize>()
        }
        "select-all" => {
            let fams = parse_reader(reader, &Selection::all()).expect("parses");
            fams.iter().map(|f| f.series.len()).sum::<usize>()
        }
        _ => {
            let scrape = prometheus_parse::Scrape::parse(reader.lines()).expect("parses");
            scrape.samples.len()
        }
    };
    let after = vm_hwm();
    let heap_peak = PEAK.load(Ordering::Relaxed) - heap_before;
    // One line for the parent: variant, floor, peak, series kept, peak heap growth.
    println!("{variant} {before} {after} {series} {heap_peak}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("metrics.txt");
    let size = {
        let mut out = BufWriter::new(std::fs::File::create(&path).expect("the dump file"));
        promtext_dump::write_dump(&mut out).expect("written")
    };
    let me = std::env::current_exe().expect("this binary");
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "dump: {:.1} MB ({size} bytes) at {}",
        mb(size),
        path.display()
    );
    println!(
        "{:<18} {:>9} {:>9} {:>10} {:>12} {:>13} {:>7}",
        "variant", "floor MB", "peak MB", "peak/dump", "growth/dump", "peak heap MB", "series"
    );
    for variant in VARIANTS {
        let out = Command::new(&me)
            .args(["--child", variant])
            .arg(&path)
            .output()
            .expect("the child runs");
        assert!(
            out.status.success(),
            "{variant}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = line.split_whitespace().collect();
        let (before, after): (u64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let heap: u64 = f[4].parse().unwrap();
        println!(
            "{:<18} {:>9.1} {:>9.1} {:>10.3} {:>12.3} {:>13.1} {:>7}",
            variant,
            mb(before),
            mb(after),
            after as f64 / size as f64,
            (after - before) as f64 / size as f64,
            mb(heap),
            f[3]
        );
    }
}
