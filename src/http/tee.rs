//! Sends a response body on to the client while capturing it for the
//! record: the client gets each frame as the handler produces it, instead
//! of the whole body after it ended.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Item = Result<Frame<Bytes>, BoxError>;

/// Frames buffered between the handler and a slow client: beyond this the
/// handler's body waits, so memory stays bounded.
const IN_FLIGHT: usize = 8;

/// The client's side: the frames the [`Pump`] forwards.
pub(crate) struct Relay {
    frames: mpsc::Receiver<Item>,
    hint: SizeHint,
}

impl http_body::Body for Relay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.frames.poll_recv(cx)
    }

    /// The handler's own hint, so a body of known length keeps its
    /// `Content-Length`.
    fn size_hint(&self) -> SizeHint {
        self.hint.clone()
    }
}

/// How much of the body was captured.
pub(crate) enum Captured {
    /// The whole body.
    Whole(Bytes),
    /// The body grew past the limit: `size` bytes in all.
    Over { size: usize },
    /// The body failed part-way.
    Failed(String),
}

/// The handler's side: reads the body to its end, forwarding every frame
/// but the last and capturing the data up to `limit`.
pub(crate) struct Pump<B> {
    body: Pin<Box<B>>,
    frames: mpsc::Sender<Item>,
    open: bool,
    limit: usize,
    size: usize,
    captured: Vec<u8>,
}

/// What is left to send once the key is settled: the last frame, held back
/// so that a client who has the whole answer finds it stored (or the key
/// released) when it sends its next request.
pub(crate) struct Tail {
    frames: mpsc::Sender<Item>,
    last: Option<Item>,
}

impl Tail {
    /// Sends the last frame and ends the client's body.
    pub(crate) async fn finish(self) {
        if let Some(last) = self.last {
            // A client that went away has nobody to send it to.
            let _ = self.frames.send(last).await;
        }
    }
}

/// Splits `body` into what the client reads and what reads it.
pub(crate) fn tee<B>(body: B, limit: usize) -> (Relay, Pump<B>)
where
    B: http_body::Body<Data = Bytes>,
{
    let hint = body.size_hint();
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    let expected = usize::try_from(hint.lower()).unwrap_or(usize::MAX);
    let relay = Relay { frames: rx, hint };
    let pump = Pump {
        body: Box::pin(body),
        frames: tx,
        open: true,
        limit,
        size: 0,
        captured: Vec::with_capacity(expected.min(limit)),
    };
    (relay, pump)
}

impl<B> Pump<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    /// Reads the body to its end. The client going away does not stop it:
    /// the answer is still captured for the client's retry.
    pub(crate) async fn run(mut self) -> (Captured, Tail) {
        let mut last: Option<Item> = None;
        loop {
            // Into a `BoxError` before any other await: the body's own
            // error type need not be `Send`.
            let next = match self.body.frame().await {
                Some(Ok(frame)) => Some(Ok(frame)),
                Some(Err(err)) => Some(Err(err.into())),
                None => None,
            };
            match next {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.capture(data);
                    }
                    if let Some(previous) = last.replace(Ok(frame)) {
                        self.forward(previous).await;
                    }
                }
                Some(Err(err)) => {
                    let err: BoxError = err;
                    let reason = err.to_string();
                    if let Some(previous) = last.replace(Err(err)) {
                        self.forward(previous).await;
                    }
                    return (Captured::Failed(reason), self.tail(last));
                }
                None => {
                    let captured = if self.size > self.limit {
                        Captured::Over { size: self.size }
                    } else {
                        Captured::Whole(Bytes::from(std::mem::take(&mut self.captured)))
                    };
                    return (captured, self.tail(last));
                }
            }
        }
    }

    fn capture(&mut self, data: &Bytes) {
        self.size = self.size.saturating_add(data.len());
        if self.size <= self.limit {
            self.captured.extend_from_slice(data);
        } else if !self.captured.is_empty() || self.captured.capacity() > 0 {
            self.captured = Vec::new();
        }
    }

    async fn forward(&mut self, item: Item) {
        if self.open && self.frames.send(item).await.is_err() {
            tracing::debug!("idem: the client went away; the response is still read to its end");
            self.open = false;
        }
    }

    fn tail(self, last: Option<Item>) -> Tail {
        Tail {
            frames: self.frames,
            last: last.filter(|_| self.open),
        }
    }
}
