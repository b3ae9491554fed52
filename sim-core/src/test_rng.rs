//! The unit tests' random numbers: a xorshift generator, so that a failing step number
//! reproduces on any machine without a seed file or a dependency.

/// Draws in `0..n` from a xorshift64 sequence started at `seed` (non-zero).
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
