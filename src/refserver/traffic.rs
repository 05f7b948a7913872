//! The scenario's `traffic:` — clients the server runs against itself.
//!
//! A real kube-apiserver always has clients: controllers list and watch, users create objects,
//! kubectl reads custom resources. Its counters move because of them, and a scan reads a fault in
//! how they move: APF rejections, webhook rejections and latency, conversion failures, terminated
//! watchers, a backend's 403s. An idle reference server would show none of that, so a scenario
//! says what its clients do and this module does it: each entry sends a round of `count` requests
//! every `everyMs` from right after start-up until shutdown, each read to the end of its body (a
//! watch until the server ends it), with at most `concurrency` of the entry's requests in flight
//! at once — a round waits for a free slot, not for the previous round to end.
//!
//! The requests enter [`handler::handle`] — the whole filter chain a network request gets after
//! TLS: authentication (a user's token, or its client certificate as the peer chain), APF,
//! authorization, the aggregator proxy, admission, storage, metrics. They are marked with
//! [`Traffic`] so the request log can tell the server's own clients from the client under test.
//! What the responses say is not kept: the evidence is what the server recorded, as on a cluster.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::BodyExt;
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use super::handler::{self, Traffic};
use super::scenario::TrafficSpec;
use super::state::State;
use super::tls::PeerChain;

/// How one traffic entry authenticates.
#[derive(Clone)]
enum Credential {
    Token(HeaderValue),
    Certificate(PeerChain),
}

fn credential(state: &State, user: &str) -> Option<Credential> {
    if user == "admin" {
        return HeaderValue::from_str(&format!("Bearer {}", state.auth.admin_token()))
            .ok()
            .map(Credential::Token);
    }
    let spec = state.scenario.users.iter().find(|u| u.name == user)?;
    if let Some(token) = &spec.token {
        return HeaderValue::from_str(&format!("Bearer {token}"))
            .ok()
            .map(Credential::Token);
    }
    state
        .pki
        .user_certs
        .get(user)
        .map(|c| Credential::Certificate(Some(Arc::new(c.chain.clone()))))
}

/// Start every traffic entry of the scenario; each task ends when `shutdown` turns true.
pub fn spawn(state: &Arc<State>, shutdown: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for spec in &state.scenario.traffic {
        // Validation guarantees a credential; an entry without one would only collect 401s.
        let Some(cred) = credential(state, &spec.user) else {
            continue;
        };
        let state = state.clone();
        let spec = spec.clone();
        let mut stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                () = run(&state, &spec, &cred) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        }));
    }
    tasks
}

async fn run(state: &Arc<State>, spec: &TrafficSpec, cred: &Credential) {
    let body = spec
        .body
        .as_ref()
        .map(|b| Bytes::from(serde_json::to_vec(b).unwrap_or_default()));
    // At most `concurrency` requests of this entry in flight, across rounds: a round does not wait
    // for slow requests of the previous one (clients keep coming while a webhook times out), but a
    // watch — one permit — is re-opened only when the server has ended the previous one.
    let permits = Arc::new(Semaphore::new(spec.concurrency.max(1) as usize));
    // Dropped with this task at shutdown, which aborts the requests still in flight.
    let mut in_flight = JoinSet::new();
    loop {
        let started = Instant::now();
        for _ in 0..spec.count {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (state, spec, cred, body) =
                (state.clone(), spec.clone(), cred.clone(), body.clone());
            in_flight.spawn(async move {
                send(&state, &spec, &cred, body).await;
                drop(permit);
            });
        }
        while in_flight.try_join_next().is_some() {}
        if spec.every_ms == 0 {
            while in_flight.join_next().await.is_some() {}
            return;
        }
        tokio::time::sleep_until(started + Duration::from_millis(spec.every_ms)).await;
    }
}

async fn send(state: &Arc<State>, spec: &TrafficSpec, cred: &Credential, body: Option<Bytes>) {
    let mut builder = Request::builder()
        .method(spec.method.as_str())
        .uri(spec.path.as_str())
        .header(http::header::USER_AGENT, "extpath-refserver-traffic");
    if body.is_some() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    let peer = match cred {
        Credential::Token(v) => {
            builder = builder.header(http::header::AUTHORIZATION, v.clone());
            None
        }
        Credential::Certificate(chain) => chain.clone(),
    };
    let Ok(mut req) = builder.body(body.unwrap_or_default()) else {
        return;
    };
    req.extensions_mut().insert(Traffic);
    let resp = handler::handle(state.clone(), None, req, peer).await;
    // Read to the end, as a client does: a watch lasts until the server closes it.
    let mut body = resp.into_body();
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
}
