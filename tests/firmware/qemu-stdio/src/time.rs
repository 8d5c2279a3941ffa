//! embassy-time's driver on SysTick: a 1 kHz tick (the `tick-hz-1_000`
//! feature of `embassy-time-driver`) counted in a 64-bit tick count, and
//! the executor's integrated timer queue, woken from the tick interrupt.
//!
//! A periodic tick is the simplest driver that cannot miss an alarm; at
//! 1 kHz its cost under QEMU is small, and millisecond resolution is all
//! the tools' delays and the engine's deadlines need.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

/// The processor clock of QEMU's mps2-an386 (`SYSCLK_FRQ` in hw/arm/mps2.c),
/// which SysTick counts with its core clock source.
const CPU_HZ: u32 = 25_000_000;

struct TickDriver {
    /// Ticks since [`start`].
    ticks: Mutex<Cell<u64>>,
    /// The queue's next expiration (`u64::MAX`: none).
    next: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

impl Driver for TickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                // Wakes it now when `at` has passed.
                let now = self.ticks.borrow(cs).get();
                self.next.borrow(cs).set(queue.next_expiration(now));
            }
        });
    }
}

#[allow(unsafe_code)]
mod driver {
    // The macro exports the two functions embassy-time links against.
    embassy_time_driver::time_driver_impl!(static DRIVER: super::TickDriver = super::TickDriver {
        ticks: super::Mutex::new(super::Cell::new(0)),
        next: super::Mutex::new(super::Cell::new(u64::MAX)),
        queue: super::Mutex::new(super::RefCell::new(super::Queue::new())),
    });

    pub(super) fn driver() -> &'static super::TickDriver {
        &DRIVER
    }
}

/// Starts the tick.
pub fn start(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CPU_HZ / embassy_time_driver::TICK_HZ as u32 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    let d = driver::driver();
    critical_section::with(|cs| {
        let ticks = d.ticks.borrow(cs);
        let now = ticks.get() + 1;
        ticks.set(now);
        let next = d.next.borrow(cs);
        if now >= next.get() {
            next.set(d.queue.borrow_ref_mut(cs).next_expiration(now));
        }
    });
}
