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

/// The host's cache line, as x86-64 and most ARM cores have it (a guess elsewhere: prefetches
/// of the wrong size only ask for too much or too little).
const HOST_LINE: usize = 64;

/// Asks the host to bring `s` into its caches: one line per `HOST_LINE` bytes from its first
/// byte. A slice that starts inside a line may leave its last bytes out; covering them too
/// (one more prefetch per set of the L2 walk) measured 4% slower on the Hopper GEMM.
#[inline(always)]
pub(crate) fn prefetch_slice<T>(s: &[T]) {
    // A byte offset stepped by hand: the `chunks` iterator's per-chunk length arithmetic was a
    // third of the bulk copy walk's own host time (a 16-way L2 set is six prefetches).
    let (p, bytes) = (s.as_ptr() as *const u8, size_of_val(s));
    let mut off = 0;
    while off < bytes {
        prefetch(p.wrapping_add(off));
        off += HOST_LINE;
    }
}
