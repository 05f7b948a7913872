//! A TCP proxy that can add latency: kube-apiserver reaches its etcd through one, so a test can make
//! storage slow the way a saturated disk or a distant member does — every health check still
//! passes, only requests take longer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::RUNTIME;

/// A running proxy; stops accepting when dropped (open connections end with their peers).
pub struct DelayProxy {
    pub port: u16,
    delay_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Forward 127.0.0.1:<ephemeral> to `target` (`HOST:PORT`).
    pub fn start(target: String) -> Self {
        let delay_ms = Arc::new(AtomicU64::new(0));
        let listener = RUNTIME.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let d = delay_ms.clone();
        let task = RUNTIME.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let target = target.clone();
                let d = d.clone();
                tokio::spawn(async move {
                    let Ok(upstream) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = upstream.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (ur, uw) = upstream.into_split();
                    // Only the requests wait: a response already on its way is not held back
                    // again, so the added latency per round trip is the delay, once.
                    tokio::spawn(pump(cr, uw, Some(d)));
                    pump(ur, cw, None).await;
                });
            }
        });
        DelayProxy {
            port,
            delay_ms,
            task,
        }
    }

    /// Hold every chunk sent towards the target this long from now on.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copy `from` to `to`; with `delay`, each chunk is written that long after it was read. The
/// delay is latency, not a rate: reading goes on while earlier chunks wait, so chunks of many
/// multiplexed gRPC streams on one connection each wait the delay once, never behind each other
/// (a proxy that slept before each write would queue them and grow the latency without bound).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Option<Arc<AtomicU64>>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let ms = delay.as_ref().map_or(0, |d| d.load(Ordering::Relaxed));
            let due = tokio::time::Instant::now() + Duration::from_millis(ms);
            if tx.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
