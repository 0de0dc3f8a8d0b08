//! A global allocator that counts allocations per thread, so that a test or benchmark can
//! say how many allocations a stretch of protocol code made (the switch model and the engines
//! should make none per packet once warmed up). Install it in a test or bench binary:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: switchgnn_conformance::allocations::Counting = Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised: reading it never allocates, so the allocator can use it.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the allocations (and growing reallocations) of each thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

fn count() {
    // `try_with`: a thread being torn down has no counter left, and must still allocate.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed to the system allocator unchanged; counting touches only a
// thread-local integer.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations this thread has made so far (0 unless [`Counting`] is the global allocator).
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Allocations this thread makes while running `f`, and `f`'s result.
pub fn count_allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = allocations();
    let out = f();
    (allocations() - before, out)
}
