//! Stack high-water marks: paint the free stack with a pattern, run, then
//! find the deepest word that no longer holds it.
//!
//! - [`repaint`] paints all the free stack below the caller (after folding
//!   the use since the previous paint into the deepest mark), [`scan`]
//!   finds the deepest use since, [`take_deepest`] hands out the mark: the
//!   high-water mark of a whole scenario.
//! - [`deepest_during`] measures one run of the simulation loop.
//! - [`measured`] runs one call into the core with a window of 16 KiB
//!   below it painted and scanned: the deepest single core call, and which.
//!
//! The stack runs from `_stack_start` (top of RAM) down towards
//! `_stack_end` (the end of `.data`/`.bss`, both symbols from cortex-m-rt's
//! `link.x`). Nothing else lives there: no heap, no interrupt handlers.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cortex_m::interrupt::{self, Mutex};

/// What the painted words hold. A word a frame wrote over can still hold it
/// by chance; the mark is then low by a few words at most.
const PATTERN: u32 = 0xC5AC_CE55;

/// Words left unpainted right below the stack pointer of the caller of
/// [`stack`]: its own frame is above the stack pointer, nothing below is
/// live.
const MARGIN: usize = 16;

/// Octets below the caller that [`measured`] paints and scans.
const WINDOW: usize = 16 * 1024;

/// A range of the free stack, bottom to top.
#[derive(Debug, Clone, Copy)]
struct Region {
    bottom: usize,
    top: usize,
    /// `_stack_start`.
    stack_start: usize,
    /// `bottom` is `_stack_end`, not the bottom of a window.
    whole: bool,
}

/// What to do with the free stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Write the pattern into every word of the region.
    Paint,
    /// Find the lowest word that lost the pattern.
    Scan,
}

/// Paints the free stack below the caller, or scans it for the deepest use
/// since the last paint: all of it down to `_stack_end`, or the `window`
/// octets below the caller. Returns the region and, for a scan, the lowest
/// address written (`region.top` when nothing below the caller was
/// touched).
///
/// The only `unsafe` code of the firmware. It is sound because:
/// - the words from `_stack_end` up to `MARGIN` words below the current
///   stack pointer belong to no live object: statics end at `_stack_end`,
///   and every live frame (this one included) lies above the stack pointer;
/// - the accesses are volatile, word-aligned (`_stack_end` is 4-aligned by
///   the linker script, the top and the window are rounded to words) and
///   inside RAM;
/// - no interrupt handler or other thread can use that memory meanwhile.
#[allow(unsafe_code)]
#[inline(never)]
fn stack(op: Op, window: usize) -> (Region, usize) {
    unsafe extern "C" {
        static _stack_start: u32;
        static _stack_end: u32;
    }
    let sp = cortex_m::register::msp::read() as usize;
    let end = (&raw const _stack_end) as usize;
    let top = (sp - MARGIN * 4) & !3;
    let bottom = top.saturating_sub(window & !3).max(end);
    let region = Region {
        bottom,
        top,
        stack_start: (&raw const _stack_start) as usize,
        whole: bottom == end,
    };
    let mut lowest = region.top;
    let mut at = region.bottom;
    while at < region.top {
        let word = at as *mut u32;
        match op {
            // SAFETY: see above: a free, aligned word of RAM.
            Op::Paint => unsafe { word.write_volatile(PATTERN) },
            Op::Scan => {
                // SAFETY: as above; reading it races with nothing.
                if unsafe { word.read_volatile() } != PATTERN {
                    lowest = at;
                    break;
                }
            }
        }
        at += 4;
    }
    (region, lowest)
}

/// The deepest address used since [`take_deepest`], as far as scanned.
static DEEPEST: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The free stack holds the pattern (a scan means something).
static PAINTED: AtomicBool = AtomicBool::new(false);

/// Ends the firmware: the stack ran into the statics (or out of a window),
/// so nothing measured can be trusted and memory may be corrupt.
fn overflow(what: &str) -> ! {
    cortex_m_semihosting::hprintln!("FAIL: the stack reached the end of {}", what);
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Folds the use since the last paint into the deepest mark, then paints
/// the free stack below the caller. Returns the top of the painted region.
#[inline(never)]
pub fn repaint() -> usize {
    if PAINTED.load(Ordering::Relaxed) {
        scan();
    }
    PAINTED.store(true, Ordering::Relaxed);
    stack(Op::Paint, usize::MAX).0.top
}

/// The deepest address used since the last paint, also folded into the
/// deepest mark.
#[inline(never)]
pub fn scan() -> usize {
    let (region, lowest) = stack(Op::Scan, usize::MAX);
    if lowest <= region.bottom {
        overflow("static data");
    }
    DEEPEST.fetch_min(lowest, Ordering::Relaxed);
    lowest
}

/// Runs `f` on the free stack painted afresh; returns its result and the
/// stack it used below the caller (the calls [`measured`] repainted
/// included). The deepest mark keeps what came before.
#[inline(never)]
pub fn deepest_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let top = repaint();
    let before = DEEPEST.swap(usize::MAX, Ordering::Relaxed);
    let r = f();
    scan();
    let during = DEEPEST.fetch_min(before, Ordering::Relaxed);
    (r, top.saturating_sub(during))
}

/// The deepest address used since the previous call (or the start), and
/// `_stack_start`.
pub fn take_deepest() -> (usize, usize) {
    let deepest = DEEPEST.swap(usize::MAX, Ordering::Relaxed);
    (deepest, stack(Op::Scan, 0).0.stack_start)
}

/// The deepest single core call since [`take_deepest_call`]: octets and
/// which call.
static DEEPEST_CALL: Mutex<Cell<(usize, &'static str)>> = Mutex::new(Cell::new((0, "")));

/// Runs `f`, one call into the core, and records the stack it used below
/// the caller when it is the deepest so far. The window is scanned first
/// (what earlier code left there counts for the scenario's mark), then
/// painted again.
#[inline(never)]
pub fn measured<R>(what: &'static str, f: impl FnOnce() -> R) -> R {
    if PAINTED.load(Ordering::Relaxed) {
        DEEPEST.fetch_min(stack(Op::Scan, WINDOW).1, Ordering::Relaxed);
    }
    let sp = cortex_m::register::msp::read() as usize;
    let (region, _) = stack(Op::Paint, WINDOW);
    let r = f();
    let (_, lowest) = stack(Op::Scan, WINDOW);
    // Frames need not write every word they reserve: use that comes close
    // to the window's bottom may have gone past it.
    if lowest < region.bottom + WINDOW / 8 && !region.whole {
        overflow("the measuring window (raise WINDOW in stack.rs)");
    }
    DEEPEST.fetch_min(lowest, Ordering::Relaxed);
    let depth = sp - lowest;
    interrupt::free(|cs| {
        let cell = DEEPEST_CALL.borrow(cs);
        if depth > cell.get().0 {
            cell.set((depth, what));
        }
    });
    r
}

/// The deepest call [`measured`] saw since the previous call, and which.
pub fn take_deepest_call() -> (usize, &'static str) {
    interrupt::free(|cs| DEEPEST_CALL.borrow(cs).replace((0, "")))
}
