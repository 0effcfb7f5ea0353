//! A TCP proxy on loopback that loses responses on demand: the request
//! reaches the server whole, the server answers, and the proxy closes the
//! client's connection instead of passing the answer on. The client cannot
//! tell whether its request ran; that is what idempotency keys are for.
//! The `client_retries` example and `tests/all/client.rs` both use it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy: listens on `addr`, forwards to its upstream.
pub(crate) struct LossyProxy {
    pub addr: SocketAddr,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    /// Responses still to lose.
    to_lose: AtomicU32,
    /// Responses lost so far.
    lost: AtomicU32,
}

impl LossyProxy {
    /// A proxy to `upstream` on a free loopback port, losing nothing yet.
    pub(crate) async fn start(upstream: SocketAddr) -> LossyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let counts = Arc::new(Counts::default());
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, shared.clone()));
            }
        });
        LossyProxy { addr, counts }
    }

    /// Loses the next `n` responses, each with its connection.
    pub(crate) fn lose_next(&self, n: u32) {
        self.counts.to_lose.store(n, Ordering::SeqCst);
    }

    /// How many responses were lost.
    pub(crate) fn lost(&self) -> u32 {
        self.counts.lost.load(Ordering::SeqCst)
    }
}

/// One client connection: requests go up untouched; what the server sends
/// goes down, unless a loss is armed: then the connection ends instead (a
/// loss armed before a request loses its whole response).
async fn relay(client: TcpStream, upstream: SocketAddr, counts: Arc<Counts>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let losing = counts
                .to_lose
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if losing.is_ok() {
                counts.lost.fetch_add(1, Ordering::SeqCst);
                tracing::info!(target: "lossy_proxy", "response lost, connection closed");
                return;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    // Whichever side ends first ends the connection: a lost response drops
    // both halves of the client's socket, which sees it closed mid-answer.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
