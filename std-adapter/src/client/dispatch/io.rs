//! The links of the client driver ([`Dispatcher`]): each one opened
//! by the [`Connector`] in a task of its own, its octets read into the
//! engine a `recv` at a time (input it cannot take yet waits in the
//! link), the engine's output gathered up to [`WRITE_HIGH`] and written
//! as the socket takes it, and a link the engine let go of shut once its
//! output is out (or after [`CLOSE_LINGER`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use mcpwire_core::mcp::client::{ClientEngine, LinkId};
use tokio::io::ReadBuf;

use super::super::link::{BoxIo, Connector, Opened};
use super::{CLOSE_LINGER, Dispatcher, WRITE_HIGH};
use crate::clock::now;

/// A link the engine asked for.
pub(super) struct Link {
    id: LinkId,
    /// `None` while it is being opened.
    io: Option<BoxIo>,
    /// Output not yet written: `out[written..]`.
    out: Vec<u8>,
    written: usize,
    /// Input the engine did not take yet (it must write first, and the
    /// write buffer is full): nothing more is read meanwhile.
    pending: Vec<u8>,
    eof: bool,
    /// The engine is done with it: closed once `out` is written, or when
    /// this runs out ([`CLOSE_LINGER`]).
    closing: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Link {
    pub(super) fn backlog(&self) -> usize {
        self.out.len() - self.written
    }
}

/// What happened on a link.
pub(super) enum IoEvent {
    Read {
        at: usize,
        n: usize,
    },
    Eof {
        at: usize,
    },
    Wrote {
        at: usize,
        n: usize,
    },
    /// Written out and shut: the link can go.
    Shut {
        at: usize,
    },
    Failed {
        at: usize,
    },
}
impl<E: ClientEngine, C: Connector> Dispatcher<E, C> {
    /// Opens `link` in a task of its own.
    pub(super) fn connect(&mut self, link: LinkId) {
        self.links_opened += 1;
        self.links.push(Link {
            id: link,
            io: None,
            out: Vec::new(),
            written: 0,
            pending: Vec::new(),
            eof: false,
            closing: None,
        });
        let connector = Arc::clone(&self.connector);
        self.opening
            .spawn(async move { (link, connector.connect(link).await) });
    }

    /// The engine is done with `link`: it closes once its output is
    /// written, or after [`CLOSE_LINGER`].
    pub(super) fn disconnect(&mut self, link: LinkId) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == link)
            && l.closing.is_none()
        {
            l.closing = Some(Box::pin(tokio::time::sleep(CLOSE_LINGER)));
        }
    }

    /// A link was opened, or could not be.
    pub(super) fn opened(&mut self, link: LinkId, opened: Opened) {
        let Some(at) = self.links.iter().position(|l| l.id == link) else {
            return;
        };
        if self.links[at].closing.is_some() {
            // Let go while it was being opened.
            self.links.remove(at);
            return;
        }
        match opened {
            Ok((io, negotiated)) => {
                self.links[at].io = Some(io);
                self.engine.link_up(link, negotiated, now());
            }
            Err(e) => {
                self.links.remove(at);
                let reason = format!("{}: {e}", self.connector.describe());
                self.engine.link_failed(link, reason.as_bytes(), now());
            }
        }
    }

    /// Moves the engine's output into the links' write buffers, up to the
    /// high-water mark; whether any moved.
    pub(super) fn fill_outputs(&mut self) -> bool {
        let mut moved = false;
        for at in 0..self.links.len() {
            moved |= self.fill(at);
        }
        moved
    }

    pub(super) fn fill(&mut self, at: usize) -> bool {
        let mut moved = false;
        loop {
            let link = &mut self.links[at];
            if link.io.is_none() || link.backlog() >= WRITE_HIGH {
                return moved;
            }
            let id = link.id;
            if !self.engine.wants_transmit(id) {
                return moved;
            }
            if link.written == link.out.len() {
                link.out.clear();
                link.written = 0;
            }
            let n = self.engine.poll_transmit(id, &mut self.scratch);
            if n == 0 {
                return moved;
            }
            self.links[at].out.extend_from_slice(&self.scratch[..n]);
            moved = true;
            self.drain();
        }
    }

    pub(super) fn on_io(&mut self, event: IoEvent) {
        match event {
            IoEvent::Read { at, n } => self.feed(at, n),
            IoEvent::Eof { at } => {
                let link = &mut self.links[at];
                link.eof = true;
                let id = link.id;
                self.engine.recv_eof(id, now());
            }
            IoEvent::Wrote { at, n } => {
                let link = &mut self.links[at];
                link.written += n;
                if link.written == link.out.len() {
                    link.out.clear();
                    link.written = 0;
                }
            }
            IoEvent::Shut { at } => {
                self.links.remove(at);
            }
            IoEvent::Failed { at } => {
                let link = self.links.remove(at);
                if !link.eof {
                    self.engine.recv_eof(link.id, now());
                }
            }
        }
    }

    /// Feeds the `n` octets just read on link `at` (in `self.read`).
    pub(super) fn feed(&mut self, at: usize, n: usize) {
        let read = std::mem::take(&mut self.read);
        self.feed_bytes(at, &read[..n]);
        self.read = read;
    }

    /// Input kept while the link's output was full, fed once it has room.
    pub(super) fn feed_pending(&mut self) {
        for at in 0..self.links.len() {
            let link = &self.links[at];
            if link.pending.is_empty() || link.backlog() >= WRITE_HIGH {
                continue;
            }
            let pending = std::mem::take(&mut self.links[at].pending);
            self.feed_bytes(at, &pending);
        }
    }

    /// Feeds `input` of link `at` to the engine as the run loop says: a
    /// `recv` at a time, the events after each; when it takes nothing it
    /// writes first. What is left (the write buffer full) waits in the
    /// link's `pending`.
    pub(super) fn feed_bytes(&mut self, at: usize, mut input: &[u8]) {
        let id = self.links[at].id;
        while !input.is_empty() {
            let used = self.engine.recv(id, input, now());
            input = &input[used.min(input.len())..];
            self.drain();
            if used > 0 {
                continue;
            }
            if !self.engine.wants_transmit(id) {
                // Takes nothing and owes nothing: the engine let the link
                // go (its octets are dropped) or is stuck.
                return;
            }
            self.fill(at);
            if self.links.get(at).is_none_or(|l| l.backlog() >= WRITE_HIGH) {
                break;
            }
        }
        if let Some(link) = self.links.get_mut(at)
            && link.id == id
        {
            link.pending.extend_from_slice(input);
        }
    }
}

/// Polls every open link: its write buffer into the socket, then (when
/// it has room to answer and nothing waits) a read into `read`. The first
/// link that did something says what.
pub(super) fn poll_links(
    links: &mut [Link],
    read: &mut [u8],
    cursor: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<IoEvent> {
    let n = links.len();
    for k in 0..n {
        let at = (*cursor + k) % n;
        let link = &mut links[at];
        let reads = !(link.eof
            || !link.pending.is_empty()
            || link.backlog() >= WRITE_HIGH
            || link.closing.is_some());
        let Some(io) = link.io.as_mut() else {
            continue;
        };
        if let Some(linger) = link.closing.as_mut()
            && linger.as_mut().poll(cx).is_ready()
        {
            // What it still had to write is dropped with it.
            *cursor = at + 1;
            return Poll::Ready(IoEvent::Shut { at });
        }
        if link.written < link.out.len() {
            match Pin::new(&mut **io).poll_write(cx, &link.out[link.written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    *cursor = at + 1;
                    return Poll::Ready(IoEvent::Failed { at });
                }
                Poll::Ready(Ok(n)) => {
                    *cursor = at + 1;
                    return Poll::Ready(IoEvent::Wrote { at, n });
                }
                Poll::Pending => {}
            }
        } else if link.closing.is_some() {
            if Pin::new(&mut **io).poll_shutdown(cx).is_ready() {
                *cursor = at + 1;
                return Poll::Ready(IoEvent::Shut { at });
            }
            continue;
        }
        if !reads {
            continue;
        }
        let mut buf = ReadBuf::new(read);
        match Pin::new(&mut **io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                *cursor = at + 1;
                let n = buf.filled().len();
                return Poll::Ready(if n == 0 {
                    IoEvent::Eof { at }
                } else {
                    IoEvent::Read { at, n }
                });
            }
            Poll::Ready(Err(_)) => {
                *cursor = at + 1;
                return Poll::Ready(IoEvent::Failed { at });
            }
            Poll::Pending => {}
        }
    }
    Poll::Pending
}
