//! The socket loop of a client connection task, shared by the gRPC
//! [`Channel`](crate::Channel)'s driver and the HTTP/2 connections of an
//! [`HttpChannel`](crate::HttpChannel): the core's run loop
//! ([`mcpwire_core::drive`]) on tokio. Each turn it moves what the state
//! machine wants to send into the write buffer (up to a high-water mark),
//! arms the timer at its next deadline, then waits for whichever comes
//! first: octets read (fed), room to write, a command from a call, or the
//! deadline. End of file is told to the machine; once nobody can send a
//! command and nothing is in flight, it says goodbye (GOAWAY) and the loop
//! ends when that is written.

use std::io;

use mcpwire_core::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::clock::Timer;

/// Octets read from the socket at a time.
const READ_BUF: usize = 64 << 10;
/// Output gathered before the loop waits for the socket to take it.
pub(crate) const WRITE_HIGH: usize = 64 << 10;

/// What a connection task's state machine does for [`run`].
pub(crate) trait Pump {
    type Command;
    /// Feeds octets read; an error ends the connection. Owed output may
    /// be appended to `out` on the way.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()>;
    /// Appends what the machine wants to send to `out`, up to about
    /// `limit` octets.
    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize);
    /// A call's command.
    fn command(&mut self, cmd: Self::Command);
    /// The socket reached end of file.
    fn recv_eof(&mut self);
    /// The machine's next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The deadline passed.
    fn handle_timeout(&mut self);
    /// Over: nothing more to read or send.
    fn is_closed(&self) -> bool;
    /// No call in flight and none waiting.
    fn is_idle(&self) -> bool;
    /// Nobody can start a call any more: end gracefully.
    fn go_away(&mut self);
}

/// Runs `pump` over `rd`/`wr` until the connection ends: closed, end of
/// file, a socket error (returned), or goodbye once commands are closed
/// and nothing is in flight. The socket is not shut down here.
pub(crate) async fn run<P, R, W>(
    pump: &mut P,
    rd: &mut R,
    wr: &mut W,
    rx: &mut mpsc::UnboundedReceiver<P::Command>,
) -> io::Result<()>
where
    P: Pump,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut rbuf = vec![0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(WRITE_HIGH + (16 << 10));
    let mut written = 0;
    let mut eof = false;
    let mut commands_open = true;
    let mut goaway_sent = false;
    let mut timer = Timer::new();
    loop {
        if written == out.len() {
            out.clear();
            written = 0;
        }
        // Nobody can start a call any more and none runs: say goodbye.
        if !commands_open && pump.is_idle() && !goaway_sent {
            goaway_sent = true;
            pump.go_away();
        }
        pump.transmit(&mut out, WRITE_HIGH);
        if written == out.len() && (pump.is_closed() || eof || goaway_sent) {
            return Ok(());
        }
        timer.set(pump.poll_timeout());
        tokio::select! {
            // A server that sends and never reads makes no more output
            // gather here: past the high-water mark its octets wait in the
            // socket.
            r = rd.read(&mut rbuf), if !eof && out.len() < WRITE_HIGH => match r {
                Ok(0) => {
                    eof = true;
                    pump.recv_eof();
                }
                Ok(n) => pump.feed(&rbuf[..n], &mut out)?,
                Err(e) => return Err(e),
            },
            r = wr.write(&out[written..]), if written < out.len() => {
                written += r?;
            }
            cmd = rx.recv(), if commands_open => match cmd {
                Some(cmd) => {
                    pump.command(cmd);
                    // The commands queued meanwhile as well, before the
                    // output is written: calls started together (a
                    // bridge's batch of requests) go out in one write; at
                    // most a bounded batch, so reading and writing go on
                    // while commands keep coming.
                    for _ in 1..COMMAND_BATCH {
                        let Ok(cmd) = rx.try_recv() else { break };
                        pump.command(cmd);
                    }
                }
                None => commands_open = false,
            },
            () = timer.fired(), if timer.is_set() => pump.handle_timeout(),
        }
    }
}

/// Commands taken in one turn of the loop before it reads and writes.
const COMMAND_BATCH: usize = 64;

/// Shuts the write half down, ignoring errors (the peer may be gone).
pub(crate) async fn shutdown<W: AsyncWrite + Unpin>(wr: &mut W) {
    let _ = wr.shutdown().await;
}
