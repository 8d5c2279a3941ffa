//! Test storage shared by the test helper modules: records on the heap,
//! grown on demand as a driver with an allocator would give them.

use mcpwire_core::records::Records;

/// A `Vec` that starts empty and never exceeds `N` elements.
#[derive(Debug)]
pub struct GrowingRecords<T, const N: usize>(pub Vec<T>);

impl<T, const N: usize> Default for GrowingRecords<T, N> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T, const N: usize> std::ops::Deref for GrowingRecords<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const N: usize> std::ops::DerefMut for GrowingRecords<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Default, const N: usize> Records<T> for GrowingRecords<T, N> {
    const LIMIT: usize = N;

    fn grow_to(&mut self, len: usize) -> bool {
        if len > N {
            return false;
        }
        if len > self.0.len() {
            self.0.resize_with(len, T::default);
        }
        true
    }
}
