//! UART0 of mps2-an386 (an Arm CMSDK APB UART at 0x4000_4000) as an
//! `embedded-io-async` serial link: received octets go through an
//! interrupt-fed ring ([`RX_RING`] octets) to [`Uart::read`]; writes go
//! straight to the one-octet transmit register, waiting on the transmit
//! interrupt when it is full.
//!
//! The CMSDK UART has no FIFO: one received octet is held until `DATA` is
//! read. QEMU's model (hw/char/cmsdk-apb-uart.c) takes a new octet from its
//! character backend only while that holder is empty, so the host's pipe
//! pushes back instead of losing octets. The driver keeps that
//! back-pressure end to end: when the ring is full it leaves the octet in
//! the UART and stops the receive interrupt, and a read that frees room
//! takes it and restarts the interrupt. A receive overrun (a real UART
//! clocked faster than the firmware drains it) cannot be undone: it is
//! counted and reported on the semihosting stderr, and the damaged line is
//! the stdio engine's to reject (-32700) before it resyncs at the next
//! newline.
//!
//! [`Uart::read`] is cancel-safe (the engine races it with its handlers
//! and timers): octets stay in the ring until a read completes.

use core::convert::Infallible;
use core::future::poll_fn;
use core::sync::atomic::{AtomicU32, Ordering};
use core::task::Poll;

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::NVIC;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_sync::waitqueue::AtomicWaker;
use embedded_io_async::{ErrorType, Read, Write};

/// Octets received and not yet read: enough for the engine to take input
/// in runs while the next octets arrive.
pub const RX_RING: usize = 256;

const BASE: usize = 0x4000_4000;
// Register offsets.
const DATA: usize = 0x00;
const STATE: usize = 0x04;
const CTRL: usize = 0x08;
/// INTSTATUS when read, INTCLEAR when written.
const INTCLEAR: usize = 0x0c;
const BAUDDIV: usize = 0x10;

// STATE.
const TX_FULL: u32 = 1 << 0;
const RX_FULL: u32 = 1 << 1;
const RX_OVERRUN: u32 = 1 << 3;
// CTRL.
const TX_EN: u32 = 1 << 0;
const RX_EN: u32 = 1 << 1;
const TX_INTEN: u32 = 1 << 2;
const RX_INTEN: u32 = 1 << 3;
const RX_OVERRUN_INTEN: u32 = 1 << 5;
// INTSTATUS / INTCLEAR.
const INT_TX: u32 = 1 << 0;
const INT_RX: u32 = 1 << 1;

/// The 25 MHz peripheral clock over 115,200 baud (the hardware needs a
/// divider of at least 16). QEMU's model does not pace by it: octets move
/// as fast as the host's pipe and the interrupts take them.
const DIVIDER: u32 = 25_000_000 / 115_200;

/// UART0's interrupt lines on mps2-an386 (hw/arm/mps2.c): receive,
/// transmit, and the overruns of UARTs 0 to 2 ORed together.
pub const IRQ_RX: i16 = 0;
/// See [`IRQ_RX`].
pub const IRQ_TX: i16 = 1;
/// See [`IRQ_RX`].
pub const IRQ_OVERRUN: i16 = 12;

static RX: Pipe<CriticalSectionRawMutex, RX_RING> = Pipe::new();
static TX_WAKER: AtomicWaker = AtomicWaker::new();
static OVERRUNS: AtomicU32 = AtomicU32::new(0);

#[allow(unsafe_code)]
fn read_reg(offset: usize) -> u32 {
    // SAFETY: a word-aligned register of UART0, always mapped on this
    // board; reading DATA takes the received octet, which only the
    // callers below do, inside a critical section.
    unsafe { core::ptr::read_volatile((BASE + offset) as *const u32) }
}

#[allow(unsafe_code)]
fn write_reg(offset: usize, value: u32) {
    // SAFETY: as in `read_reg`; the writes are the register's documented
    // uses (a control word, a divider, an octet, clear bits).
    unsafe { core::ptr::write_volatile((BASE + offset) as *mut u32, value) }
}

/// Sets or clears `bits` of CTRL (the interrupt handlers change it too).
fn ctrl(bits: u32, on: bool) {
    critical_section::with(|_| {
        let value = read_reg(CTRL);
        write_reg(CTRL, if on { value | bits } else { value & !bits });
    });
}

#[derive(Clone, Copy)]
struct Irq(i16);

// SAFETY: the numbers are interrupt lines of this board (`IRQ_*`).
#[allow(unsafe_code)]
unsafe impl InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0.unsigned_abs()
    }
}

/// UART0 as a serial link. There is one: [`Uart::take`] hands it out once.
#[derive(Debug)]
pub struct Uart {
    _private: (),
}

impl Uart {
    /// Sets UART0 up (115,200 baud, receive and transmit on, the receive
    /// and overrun interrupts unmasked), the first time; `None` after.
    pub fn take() -> Option<Self> {
        static TAKEN: AtomicU32 = AtomicU32::new(0);
        if TAKEN.swap(1, Ordering::Relaxed) != 0 {
            return None;
        }
        write_reg(CTRL, 0);
        write_reg(BAUDDIV, DIVIDER);
        write_reg(STATE, RX_OVERRUN);
        write_reg(INTCLEAR, INT_TX | INT_RX);
        write_reg(CTRL, TX_EN | RX_EN | RX_INTEN | RX_OVERRUN_INTEN);
        for irq in [IRQ_RX, IRQ_TX, IRQ_OVERRUN] {
            // SAFETY: the handlers (`on_interrupt`) only touch this
            // module's state, through critical sections.
            #[allow(unsafe_code)]
            unsafe {
                NVIC::unmask(Irq(irq));
            }
        }
        Some(Self { _private: () })
    }
}

/// The UART's interrupt handler, for lines [`IRQ_RX`], [`IRQ_TX`] and
/// [`IRQ_OVERRUN`].
pub fn on_interrupt(irq: i16) {
    match irq {
        IRQ_RX => pump_rx(),
        IRQ_TX => {
            write_reg(INTCLEAR, INT_TX);
            ctrl(TX_INTEN, false);
            TX_WAKER.wake();
        }
        IRQ_OVERRUN if read_reg(STATE) & RX_OVERRUN != 0 => {
            write_reg(STATE, RX_OVERRUN);
            let n = OVERRUNS.fetch_add(1, Ordering::Relaxed) + 1;
            cortex_m_semihosting::heprintln!("uart0: receive overrun {}: an octet was lost", n);
        }
        _ => {}
    }
}

/// Moves the received octet(s) into the ring while it has room; when it
/// is full, leaves the octet in the UART (which then takes no more input)
/// and stops the receive interrupt until a read frees room.
fn pump_rx() {
    critical_section::with(|_| {
        write_reg(INTCLEAR, INT_RX);
        // On before the last look at RX_FULL: an octet that arrives after
        // it raises the interrupt again (the model flags a reception only
        // while the interrupt is enabled).
        ctrl(RX_INTEN, true);
        while read_reg(STATE) & RX_FULL != 0 {
            if RX.free_capacity() == 0 {
                ctrl(RX_INTEN, false);
                write_reg(INTCLEAR, INT_RX);
                return;
            }
            let octet = read_reg(DATA) as u8;
            let _ = RX.try_write(&[octet]);
        }
    });
}

impl ErrorType for Uart {
    type Error = Infallible;
}

impl Read for Uart {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Cancel-safe: the pipe gives octets up only when the read ends.
        let n = RX.read(buf).await;
        // Room again: take what a full ring left in the UART.
        pump_rx();
        Ok(n)
    }
}

impl Write for Uart {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        if buf.is_empty() {
            return Ok(0);
        }
        poll_fn(|cx| {
            loop {
                let mut n = 0;
                while n < buf.len() && read_reg(STATE) & TX_FULL == 0 {
                    write_reg(DATA, u32::from(buf[n]));
                    n += 1;
                }
                if n > 0 {
                    return Poll::Ready(Ok(n));
                }
                TX_WAKER.register(cx.waker());
                ctrl(TX_INTEN, true);
                // Emptied before the interrupt was on: no interrupt comes.
                if read_reg(STATE) & TX_FULL != 0 {
                    return Poll::Pending;
                }
            }
        })
        .await
    }

    async fn flush(&mut self) -> Result<(), Infallible> {
        poll_fn(|cx| {
            if read_reg(STATE) & TX_FULL == 0 {
                return Poll::Ready(Ok(()));
            }
            TX_WAKER.register(cx.waker());
            ctrl(TX_INTEN, true);
            if read_reg(STATE) & TX_FULL == 0 {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
    }
}
