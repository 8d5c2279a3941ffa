//! Growable record storage with a fixed limit: where a connection keeps its
//! stream slots, an engine its calls and an HPACK decoder its dynamic table.
//!
//! The state machines index these like slices and ask for more room with
//! [`Records::grow_to`] when they need it (a new stream, a longer table),
//! never beyond the limit the caller chose (`N`). They never shrink: a slot
//! keeps its place once it exists, so indices stay valid.
//!
//! [`InlineRecords`], the default, holds all `N` elements inline: the
//! owner's `size_of` is its whole cost and growing cannot fail. A driver
//! with an allocator passes storage that allocates as the records grow, so
//! that a connection that has seen one call at a time holds one slot, not
//! `N` (the tokio driver's `HeapRecords`).

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

/// Elements `0..len()`, growable up to a fixed limit.
///
/// New elements are `T::default()`. An implementation must keep existing
/// elements and their indices when it grows.
pub trait Records<T>: Deref<Target = [T]> + DerefMut + Default {
    /// The most elements it can ever hold.
    const LIMIT: usize;

    /// Makes it at least `len` elements long, the new ones default. False,
    /// and unchanged, when `len` is above [`Records::LIMIT`] (or, for
    /// storage that can refuse, when the room cannot be had).
    fn grow_to(&mut self, len: usize) -> bool;
}

/// `N` elements inline, of which the first `len` are in use.
#[derive(Debug, Clone)]
pub struct InlineRecords<T, const N: usize> {
    items: [T; N],
    len: usize,
}

impl<T: Default, const N: usize> Default for InlineRecords<T, N> {
    fn default() -> Self {
        Self {
            items: core::array::from_fn(|_| T::default()),
            len: 0,
        }
    }
}

impl<T, const N: usize> Deref for InlineRecords<T, N> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.items[..self.len]
    }
}

impl<T, const N: usize> DerefMut for InlineRecords<T, N> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items[..self.len]
    }
}

impl<T: Default, const N: usize> Records<T> for InlineRecords<T, N> {
    const LIMIT: usize = N;

    #[inline]
    fn grow_to(&mut self, len: usize) -> bool {
        if len > N {
            return false;
        }
        // Elements past `len` were never handed out: they are still default.
        self.len = self.len.max(len);
        true
    }
}

/// A first-in, first-out queue over [`Records`]: it grows (to the storage's
/// limit) when full instead of refusing, and refuses only at the limit.
#[derive(Debug)]
pub struct Queue<T, R> {
    items: R,
    head: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T, R: Default> Default for Queue<T, R> {
    fn default() -> Self {
        Self {
            items: R::default(),
            head: 0,
            len: 0,
            _t: PhantomData,
        }
    }
}

impl<T, R: Records<Option<T>>> Queue<T, R> {
    /// How many elements wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value`; gives it back when the storage is at its limit.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let n = self.items.len();
        if self.len == n {
            if !self.items.grow_to(n + 1) {
                return Err(value);
            }
            // Oldest first again, so the new room follows the newest.
            self.items[..n].rotate_left(self.head);
            self.head = 0;
        }
        let at = (self.head + self.len) % self.items.len();
        self.items[at] = Some(value);
        self.len += 1;
        Ok(())
    }

    /// Takes the oldest element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.items[self.head].take();
        self.head = (self.head + 1) % self.items.len();
        self.len -= 1;
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_its_limit_and_keeps_elements() {
        let mut r = InlineRecords::<u32, 3>::default();
        assert!(r.is_empty());
        assert!(r.grow_to(2));
        r[1] = 7;
        assert!(r.grow_to(1), "growing to less is a no-op");
        assert_eq!(&r[..], &[0, 7]);
        assert!(!r.grow_to(4));
        assert_eq!(r.len(), 2);
        assert!(r.grow_to(3));
        assert_eq!(&r[..], &[0, 7, 0]);
    }

    #[test]
    fn queue_grows_in_order_across_the_wrap() {
        let mut q = Queue::<u32, InlineRecords<Option<u32>, 4>>::default();
        assert_eq!(q.pop(), None);
        q.push(1).unwrap();
        q.push(2).unwrap();
        assert_eq!(q.pop(), Some(1));
        q.push(3).unwrap();
        // Storage is 2 long and wraps (head 1): growing keeps the order.
        q.push(4).unwrap();
        q.push(5).unwrap();
        assert_eq!(q.len(), 4);
        assert_eq!(q.push(6), Err(6), "at the limit");
        let mut out = [0; 4];
        for o in &mut out {
            *o = q.pop().unwrap();
        }
        assert_eq!(out, [2, 3, 4, 5]);
        assert!(q.is_empty());
        // Full-length storage wraps without growing.
        for v in 10..14 {
            q.push(v).unwrap();
        }
        assert_eq!(q.pop(), Some(10));
        q.push(14).unwrap();
        assert_eq!(q.pop(), Some(11));
        assert_eq!(q.items.len(), 4);
    }
}
