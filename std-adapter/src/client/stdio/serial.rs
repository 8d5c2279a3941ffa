//! A serial device as the stdio binding's link (MCP 2026-07-28 §6 over a
//! UART: a board running `mcpwire-embassy`'s `serve_stdio`): the octets
//! the device sends are the server's stdout, what is written to it the
//! server's stdin. There is no process: the device is opened in raw mode,
//! read and written without blocking a thread, and opened again after it
//! went away (a board reset, a USB adapter pulled and plugged back).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustix::termios::{self, ControlModes, OptionalActions, QueueSelector};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The line speed when none is given: what most boards' UARTs and USB
/// serial adapters default to.
pub const DEFAULT_BAUD: u32 = 115_200;

/// A serial device that speaks the stdio binding: its path
/// (`/dev/ttyACM0`, `/dev/ttyUSB0`, a pseudo-terminal) and line speed.
/// Opened raw: 8 data bits, no parity, one stop bit, no echo, no line
/// editing, no flow control, modem lines ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerialDevice {
    pub path: PathBuf,
    pub baud: u32,
}

impl SerialDevice {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            baud: DEFAULT_BAUD,
        }
    }

    pub fn baud(mut self, baud: u32) -> Self {
        self.baud = baud;
        self
    }
}

/// Opens `device` (never as this process's controlling terminal), sets it
/// raw at its speed, drops what waited in its buffers from before this
/// open, and returns its two halves.
pub(crate) fn open(device: &SerialDevice) -> Result<(SerialReader, SerialWriter), String> {
    let shown = device.path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(&device.path)
        .map_err(|e| format!("cannot open the serial device {shown}: {e}"))?;
    let not_a_tty = |e: rustix::io::Errno| format!("{shown} is not a serial device: {e}");
    let mut t = termios::tcgetattr(&file).map_err(not_a_tty)?;
    t.make_raw();
    t.control_modes |= ControlModes::CLOCAL | ControlModes::CREAD;
    t.control_modes -= ControlModes::CSTOPB;
    t.set_speed(device.baud)
        .map_err(|e| format!("{shown}: the speed {} is not supported: {e}", device.baud))?;
    termios::tcsetattr(&file, OptionalActions::Now, &t)
        .map_err(|e| format!("cannot set {shown} up: {e}"))?;
    // Octets of an earlier session (or a board's boot) are no request's
    // answer.
    let _ = termios::tcflush(&file, QueueSelector::IFlush);
    // `AsyncFd::new` is deprecated for types whose descriptor could be
    // closed while registered; a `File` owns its descriptor, and the
    // `AsyncFd` owns the `File` (the safe way that stays, `register`, is an
    // `unsafe fn` for that reason, and this crate has no unsafe code).
    #[allow(deprecated)]
    let fd =
        AsyncFd::new(file).map_err(|e| format!("cannot poll the serial device {shown}: {e}"))?;
    let fd = Arc::new(fd);
    Ok((SerialReader(fd.clone()), SerialWriter(fd)))
}

/// What the device sends.
pub(crate) struct SerialReader(Arc<AsyncFd<File>>);

/// What goes to the device.
pub(crate) struct SerialWriter(Arc<AsyncFd<File>>);

impl AsyncRead for SerialReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|fd| (&mut fd.get_ref()).read(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // A pseudo-terminal whose other side closed says EIO, a
                // device that went away ENXIO or ENODEV: all mean the
                // server's stdout ended.
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for SerialWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            match ready.try_io(|fd| (&mut fd.get_ref()).write(data)) {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
