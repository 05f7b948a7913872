//! The one integration test binary (one link step keeps `cargo test` fast on 2 cores).
//! Each area of the tool has its own module.

mod util;

mod bundle_load;
mod captures;
mod cli_habits;
mod cli_transcripts;
mod collect;
mod collect_logs_events;
mod collect_many;
mod collect_progress;
mod completions;
mod daemons;
mod delegation;
mod docs;
mod engine_captures;
mod engine_design;
mod engine_docs;
mod engine_rules;
mod etcd;
mod exporter;
mod fleet;
mod generalise;
mod krew;
mod prometheus;
mod promtext;
mod raw_import;
mod raw_import_errors;
mod raw_import_hops;
mod raw_import_kinds;
mod raw_import_robust;
mod rbac_semantics;
mod refserver;
mod refserver_profile;
mod refserver_traffic;
mod replay;
mod replay_recorded;
mod replay_recorded_cli;
mod report;
mod report_cases;
mod report_junit;
mod report_waivers;
mod scan;
mod scan_hostile;
mod waivers_doc;
mod why;
