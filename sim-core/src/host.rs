//! Hints to the host CPU that change nothing in the model: the one place sim-core uses
//! `std::arch`.
//!
//! Why: the model's state is large (a chip's SMs, warps and L2 tags are megabytes), and the
//! engine visits it in an order the hardware prefetcher cannot guess (the SMs due this cycle,
//! an access's L2 sets). Asking for the next piece while working on this one hides part of
//! the host's memory latency. A prefetch reads nothing into the program and cannot fault.

/// Asks the host to bring the cache line holding `p` into its caches.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect; it does not dereference `p` and does
    // not fault on any address.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
