//! APF debug dumps → `apf_state`: `/debug/api_priority_and_fairness/dump_priority_levels` and
//! `dump_queues`, as kube-apiserver prints them (comma-separated columns padded with spaces, a
//! header row naming them). Columns are found by name, so the wider tables of newer releases
//! (`DispatchedRequests`, `RejectedRequests`, …) read the same. An exempt level prints `<none>`.
//! Both dumps of one import merge into one entry per priority level.

use std::collections::HashMap;

use super::state::{FileCtx, FileError, Importer, Yield};

/// Whether the first line is a dump header (detection).
pub(crate) fn is_header(line: &str) -> bool {
    line.trim_start().starts_with("PriorityLevelName,")
}

/// Read a dump.
pub(crate) fn read(imp: &mut Importer, _file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| FileError::whole("empty APF dump"))?;
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| columns.iter().position(|c| *c == name);
    // Both dumps start with PriorityLevelName; only dump_queues has a queue Index per row.
    let queues_dump = col("Index").is_some();
    let mut per_level: HashMap<String, (u64, u64)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() < 2 {
            return Err(FileError::at(
                i + 1,
                "APF dump row with fewer than two columns",
            ));
        }
        let cell = |name: &str| col(name).and_then(|c| cells.get(c)).copied();
        let number = |name: &str| -> Result<Option<u64>, FileError> {
            match cell(name) {
                None | Some("<none>") | Some("") => Ok(None),
                Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                    FileError::at(i + 1, format!("APF dump: {name} is not a number: {v:?}"))
                }),
            }
        };
        let flag = |name: &str| cell(name) == Some("true");
        let name = cells[0].to_string();
        if queues_dump {
            let pending = number("PendingRequests")?.unwrap_or(0);
            let e = per_level.entry(name.clone()).or_insert_with(|| {
                order.push(name.clone());
                (0, 0)
            });
            e.0 += 1;
            e.1 += pending;
            continue;
        }
        // Exempt levels have no queues at all: every column reads `<none>`.
        let exempt = cell("ActiveQueues") == Some("<none>");
        let active = number("ActiveQueues")?;
        let waiting = number("WaitingRequests")?;
        let executing = number("ExecutingRequests")?;
        let level = imp.apf.level(&name);
        level.exempt = exempt;
        level.active_queues = active.unwrap_or(0);
        level.idle = flag("IsIdle");
        level.quiescing = flag("IsQuiescing");
        level.waiting_requests = waiting.unwrap_or(0);
        level.executing_requests = executing.unwrap_or(0);
    }
    for name in order {
        let (queues, pending) = per_level[&name];
        let level = imp.apf.level(&name);
        level.queues = Some(queues);
        level.pending_in_queues = Some(pending);
    }
    Ok(Yield::Used)
}
