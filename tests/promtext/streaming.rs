//! The streaming entry points over real I/O: a real dump served over a loopback TCP socket in
//! small writes to `parse_async`, a file read through a tiny `BufReader` by `parse_reader`, an
//! endless body stopped by the byte cap, and a connection that fails mid-body.

use std::pin::Pin;
use std::task::{Context, Poll};

use extpath::promtext::{
    Limits, ParseErrorKind, Selection, parse_async, parse_async_with, parse_reader, parse_str,
};
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

const DUMP: &str = "13-etcd-stalled/kube-apiserver-metrics.txt";

fn dump_text() -> String {
    super::read(&crate::util::repo().join("fixtures/raw").join(DUMP))
}

fn selection() -> Selection {
    Selection::names([
        "apiserver_request_total",
        "apiserver_request_duration_seconds",
        "go_gc_duration_seconds",
    ])
}

/// A loopback server writing `body` in writes of `step` bytes (over and over when `endless`), and
/// a client stream connected to it.
async fn serve(body: Vec<u8>, step: usize, endless: bool) -> TcpStream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        loop {
            for chunk in body.chunks(step) {
                // The client hangs up once it has had enough: that ends the server too.
                if sock.write_all(chunk).await.is_err() {
                    return;
                }
            }
            if !endless {
                return;
            }
        }
    });
    TcpStream::connect(addr).await.unwrap()
}

#[tokio::test]
async fn parse_async_over_a_socket_matches_parse_str() {
    let text = dump_text();
    let want = parse_str(&text, &selection()).unwrap();
    assert_eq!(want.len(), 3);
    let stream = serve(text.into_bytes(), 1531, false).await;
    // A buffer smaller than most lines: lines span reads all the time.
    let got = parse_async(BufReader::with_capacity(97, stream), &selection())
        .await
        .unwrap();
    assert_eq!(got, want);
}

#[tokio::test]
async fn the_byte_cap_stops_an_endless_body() {
    let stream = serve(dump_text().into_bytes(), 4096, true).await;
    let limits = Limits {
        max_body_bytes: Some(3_000_000),
        ..Limits::default()
    };
    let err = parse_async_with(BufReader::new(stream), &selection(), limits)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ParseErrorKind::TooLarge);
    assert!(err.message.contains("3000000-byte limit"), "{err}");
    assert!(err.line > 10_000, "stopped at line {}", err.line);
}

#[tokio::test]
async fn an_endless_line_is_stopped_by_the_line_cap() {
    let body = vec![b'a'; 1 << 16];
    let stream = serve(body, 4096, true).await;
    let err = parse_async(BufReader::new(stream), &Selection::all())
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.line), (ParseErrorKind::TooLarge, 1));
}

/// Yields `body`, then fails: a connection reset mid-body.
struct FailsAfter {
    body: Vec<u8>,
    pos: usize,
}

impl AsyncRead for FailsAfter {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.pos == self.body.len() {
            return Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()));
        }
        let n = buf.remaining().min(self.body.len() - self.pos).min(10);
        let start = self.pos;
        buf.put_slice(&self.body[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_read_error_is_an_io_error_naming_where_reading_stopped() {
    let body = b"a 1\nb 2\nc 3".to_vec();
    let err = parse_async(
        BufReader::new(FailsAfter { body, pos: 0 }),
        &Selection::all(),
    )
    .await
    .unwrap_err();
    assert_eq!((err.kind, err.line), (ParseErrorKind::Io, 3));
    assert!(err.message.contains("read error"), "{err}");
}

#[test]
fn parse_reader_streams_a_file_through_a_tiny_buffer() {
    let path = crate::util::repo().join("fixtures/raw").join(DUMP);
    let file = std::fs::File::open(&path).unwrap();
    let got = parse_reader(std::io::BufReader::with_capacity(13, file), &selection()).unwrap();
    assert_eq!(got, parse_str(&dump_text(), &selection()).unwrap());
}
