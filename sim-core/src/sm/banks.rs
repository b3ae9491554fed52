//! Shared-memory bank conflicts: how many wavefronts (cycles of the shared-memory pipe) one warp
//! access needs.
//!
//! Shared memory has `banks` banks of `bank_width` bytes. Lanes are served in phases: a 4-byte
//! access in one phase of 32 lanes, 8-byte in two phases of 16, 16-byte in four phases of 8
//! (so each phase moves at most 128 bytes). Within a phase, lanes that read the same word share it
//! (broadcast); distinct words in the same bank serialise. A phase costs as many wavefronts as
//! its most-conflicted bank has distinct words. `LDSM` (ldmatrix) is a 16-byte access in which
//! each group of 8 lanes gives the row addresses of one 8×8 matrix.

/// Wavefronts needed by the access.
pub fn wavefronts(addrs: &[u64; 32], mask: u32, width: u32, banks: u32, bank_width: u32) -> u32 {
    let width = width.clamp(1, 16);
    // Fast path: every lane active, consecutive aligned words (the common coalesced case) needs
    // exactly one wavefront per 128-byte phase when the banks span 128 bytes.
    if mask == u32::MAX
        && width >= bank_width.max(1)
        && banks as u64 * bank_width as u64 == 128
        && addrs[0].is_multiple_of(width as u64)
        && (1..32).all(|l| addrs[l] == addrs[0] + l as u64 * width as u64)
    {
        return (32 * width).div_ceil(128);
    }
    let bw = bank_width.max(1) as u64;
    let nb = banks.max(1) as u64;
    let lanes_per_phase = (128 / width.max(4)).clamp(1, 32);
    let mut total = 0;
    let mut phase_start = 0;
    while phase_start < 32 {
        let phase_mask = if lanes_per_phase == 32 { u32::MAX } else { ((1u32 << lanes_per_phase) - 1) << phase_start };
        let m = mask & phase_mask;
        if m != 0 {
            total += phase_wavefronts(addrs, m, width as u64, bw, nb);
        }
        phase_start += lanes_per_phase;
    }
    total.max(1)
}

fn phase_wavefronts(addrs: &[u64; 32], mask: u32, width: u64, bw: u64, nb: u64) -> u32 {
    // (bank, word) pairs of every bank-width word each lane touches; at most 32 lanes × 4 words.
    let mut pairs = [(0u64, 0u64); 128];
    let mut n = 0;
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        let first = addrs[l] / bw;
        let last = (addrs[l] + width - 1) / bw;
        let mut w = first;
        while w <= last && n < pairs.len() {
            pairs[n] = (w % nb, w);
            n += 1;
            w += 1;
        }
    }
    let p = &mut pairs[..n];
    p.sort_unstable();
    let mut worst = 0u32;
    let mut i = 0;
    while i < p.len() {
        let bank = p[i].0;
        let mut distinct = 0u32;
        let mut last_word = u64::MAX;
        while i < p.len() && p[i].0 == bank {
            if p[i].1 != last_word {
                distinct += 1;
                last_word = p[i].1;
            }
            i += 1;
        }
        worst = worst.max(distinct);
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(f: impl Fn(u64) -> u64) -> [u64; 32] {
        let mut a = [0u64; 32];
        for (l, x) in a.iter_mut().enumerate() {
            *x = f(l as u64);
        }
        a
    }

    #[test]
    fn conflict_free_and_broadcast() {
        assert_eq!(wavefronts(&addrs(|l| 4 * l), u32::MAX, 4, 32, 4), 1);
        assert_eq!(wavefronts(&addrs(|_| 64), u32::MAX, 4, 32, 4), 1);
    }

    #[test]
    fn n_way_conflicts() {
        for ways in [2u64, 4, 8, 16, 32] {
            // Stride of `ways` words: lanes fold onto 32/ways banks, `ways` distinct words each.
            let a = addrs(|l| 4 * ways * l);
            assert_eq!(wavefronts(&a, u32::MAX, 4, 32, 4), ways as u32, "{ways}-way");
        }
    }

    #[test]
    fn wide_accesses_use_phases() {
        // 16-byte conflict-free: 512 bytes in four 128-byte phases.
        assert_eq!(wavefronts(&addrs(|l| 16 * l), u32::MAX, 16, 32, 4), 4);
        // 8-byte conflict-free: two phases.
        assert_eq!(wavefronts(&addrs(|l| 8 * l), u32::MAX, 8, 32, 4), 2);
    }
}
