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
        self.hint
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

/// The handler's side: reads the body to its end, forwarding each frame
/// as it comes and capturing the data up to `limit`.
pub(crate) struct Pump<B> {
    body: Pin<Box<B>>,
    frames: mpsc::Sender<Item>,
    open: bool,
    /// The body's length, when its hint is exact.
    length: Option<u64>,
    limit: usize,
    size: usize,
    captured: Vec<u8>,
}

/// What is left to send once the key is settled: the end of the body, held
/// back so that a client who has the whole answer finds it stored (or the
/// key released) when it sends its next request. For a body of unknown
/// length the end is the end of the stream (the client cannot tell the
/// body is whole before it); for one of known length, the frame that
/// completes it.
pub(crate) struct Tail {
    frames: mpsc::Sender<Item>,
    held: Vec<Item>,
}

impl Tail {
    /// Sends the held frames, if any, and ends the client's body.
    pub(crate) async fn finish(self) {
        for item in self.held {
            if self.frames.send(item).await.is_err() {
                // A client that went away has nobody to send it to.
                break;
            }
        }
    }
}

impl Tail {
    /// Ends the client's body with an error instead of its held frames:
    /// what was sent is not the answer after all.
    pub(crate) fn fail(self, reason: &'static str) {
        // Room for it or not, the channel closes when `self` drops, and a
        // body of known length that ends short is an error to the client.
        let _ = self.frames.try_send(Err(reason.into()));
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
    let pump = Pump {
        body: Box::pin(body),
        frames: tx,
        open: true,
        length: hint.exact(),
        limit,
        size: 0,
        captured: Vec::with_capacity(expected.min(limit)),
    };
    let relay = Relay { frames: rx, hint };
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
        // From the frame that completes a body of known length on.
        let mut held: Vec<Item> = Vec::new();
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
                    let complete = self.length.is_some_and(|n| self.size as u64 >= n);
                    if complete || !held.is_empty() {
                        held.push(Ok(frame));
                    } else {
                        self.forward(Ok(frame)).await;
                    }
                }
                Some(Err(err)) => {
                    let reason = err.to_string();
                    held.push(Err(err));
                    return (Captured::Failed(reason), self.tail(held));
                }
                None => {
                    let captured = if self.size > self.limit {
                        Captured::Over { size: self.size }
                    } else {
                        Captured::Whole(Bytes::from(std::mem::take(&mut self.captured)))
                    };
                    return (captured, self.tail(held));
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

    fn tail(self, mut held: Vec<Item>) -> Tail {
        if !self.open {
            held.clear();
        }
        Tail {
            frames: self.frames,
            held,
        }
    }
}
