//! Starting the reference server for a test: a scenario from `fixtures/scenarios/` by name, or
//! one written inline, on ephemeral 127.0.0.1 ports with the default options.

use extpath::refserver::{RefServer, RunningServer, StartOptions, scenario};

use super::repo;

/// The scenario `fixtures/scenarios/NAME.yaml`, served.
///
/// Unwraps freely: a scenario that does not load is a broken fixture, and the panic names it.
pub(crate) async fn start(name: &str) -> RunningServer {
    let path = repo()
        .join("fixtures/scenarios")
        .join(format!("{name}.yaml"));
    let s = scenario::load(&path).unwrap();
    RefServer::start(s, StartOptions::default()).await.unwrap()
}

/// A scenario given as YAML text, served.
pub(crate) async fn start_text(text: &str) -> RunningServer {
    let s = scenario::load_str(text, "inline.yaml").unwrap();
    RefServer::start(s, StartOptions::default()).await.unwrap()
}
