//! A TCP proxy on loopback that counts request/response turns between a
//! client and a server: a turn is the client writing after the server last
//! spoke (or for the first time). One round trip is one turn.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub(crate) struct TurnProxy {
    pub addr: SocketAddr,
    turns: Arc<AtomicUsize>,
    stalled: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
}

impl TurnProxy {
    /// Starts a proxy to `upstream` ("host:port") on a free loopback port.
    pub(crate) async fn start(upstream: String) -> TurnProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().unwrap();
        let turns = Arc::new(AtomicUsize::new(0));
        let stalled = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let counter = turns.clone();
        let stall = stalled.clone();
        let cut_next = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let turns = counter.clone();
                let stall = stall.clone();
                let cut_next = cut_next.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    // Whether the client spoke last on this connection.
                    let client_last = Arc::new(AtomicBool::new(false));
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let up = {
                        let client_last = client_last.clone();
                        async move {
                            let mut buf = vec![0u8; 64 * 1024];
                            loop {
                                let n = match cr.read(&mut buf).await {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => n,
                                };
                                if !client_last.swap(true, Ordering::SeqCst) {
                                    turns.fetch_add(1, Ordering::SeqCst);
                                }
                                if sw.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                            let _ = sw.shutdown().await;
                        }
                    };
                    let down = async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match sr.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            client_last.store(false, Ordering::SeqCst);
                            // A stalled server: its answers are held back.
                            while stall.load(Ordering::SeqCst) {
                                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            }
                            // The server answered, but the connection dies
                            // before the answer reaches the client.
                            if cut_next.swap(false, Ordering::SeqCst) {
                                break;
                            }
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = cw.shutdown().await;
                    };
                    tokio::join!(up, down);
                });
            }
        });
        TurnProxy {
            addr,
            turns,
            stalled,
            cut,
        }
    }

    /// Drops the next answer the server sends, with its connection: the
    /// request took effect, the client never hears so.
    pub(crate) fn cut_next_answer(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Holds back (`true`) or lets through (`false`) the server's answers,
    /// as a server paused with SIGSTOP would, without touching the server.
    pub(crate) fn stall(&self, stalled: bool) {
        self.stalled.store(stalled, Ordering::SeqCst);
    }

    pub(crate) fn turns(&self) -> usize {
        self.turns.load(Ordering::SeqCst)
    }

    /// Turns since the last call, once the traffic has settled (a pool's
    /// ping on release comes after the caller has its answer).
    pub(crate) async fn take(&self) -> usize {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.turns.swap(0, Ordering::SeqCst)
    }
}
