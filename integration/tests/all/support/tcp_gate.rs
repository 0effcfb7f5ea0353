//! A TCP forwarder on loopback that can cut its connections and close its
//! port, as a server that goes away would, without touching the server
//! behind it (a shared one, here).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub(crate) struct TcpGate {
    pub addr: SocketAddr,
    upstream: String,
    listener: Mutex<Option<JoinHandle<()>>>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl TcpGate {
    /// Forwards a free loopback port to `upstream` ("host:port").
    pub(crate) async fn open(upstream: String) -> TcpGate {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind gate");
        let gate = TcpGate {
            addr: listener.local_addr().unwrap(),
            upstream,
            listener: Mutex::new(None),
            conns: Arc::default(),
        };
        gate.serve(listener);
        gate
    }

    fn serve(&self, listener: TcpListener) {
        let (upstream, conns) = (self.upstream.clone(), self.conns.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let conn = tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                conns.lock().unwrap().push(conn);
            }
        });
        *self.listener.lock().unwrap() = Some(task);
    }

    /// Drops every open connection (both ends see them closed); new ones
    /// are still accepted.
    pub(crate) fn cut(&self) {
        for conn in self.conns.lock().unwrap().drain(..) {
            conn.abort();
        }
    }

    /// Cuts every connection and closes the port: connecting is refused.
    pub(crate) async fn close(&self) {
        if let Some(listener) = self.listener.lock().unwrap().take() {
            listener.abort();
        }
        self.cut();
        // Let the aborted tasks drop their sockets.
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    /// Opens the same port again.
    pub(crate) async fn reopen(&self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind gate");
        self.serve(listener);
    }
}
