//! Turning a warp's lane addresses into sector requests (32 bytes on every current part),
//! without allocating.

/// Sectors one warp access can touch: up to four per lane (a 16-byte access straddling a
/// boundary of sectors as small as 8 bytes); real accesses stay far below.
pub const MAX_SECTORS: usize = 32 * 4;

/// The unique sectors a warp access touches, ascending.
pub struct Sectors {
    buf: [u64; MAX_SECTORS],
    len: usize,
}

impl Default for Sectors {
    fn default() -> Self {
        Sectors { buf: [0; MAX_SECTORS], len: 0 }
    }
}

impl Sectors {
    pub fn as_slice(&self) -> &[u64] {
        &self.buf[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct lines of `line_bytes` (a power of two) among the sectors.
    pub fn lines(&self, line_bytes: u64) -> u64 {
        let shift = line_bytes.max(1).trailing_zeros();
        let mut n = 0;
        let mut last = u64::MAX;
        for &s in self.as_slice() {
            let l = s >> shift;
            if l != last {
                n += 1;
                last = l;
            }
        }
        n
    }

    /// Fills with the sectors of one contiguous run of `bytes` bytes from `addr` (a fully
    /// coalesced access: every lane active, lane `l` at `addr + l·width`).
    pub fn contiguous(&mut self, addr: u64, bytes: u64, sector_shift: u32) {
        let first = addr >> sector_shift;
        let last = (addr + bytes.max(1) - 1) >> sector_shift;
        let n = ((last - first + 1) as usize).min(MAX_SECTORS);
        for (i, s) in self.buf[..n].iter_mut().enumerate() {
            *s = (first + i as u64) << sector_shift;
        }
        self.len = n;
    }

    /// Fills with the sectors (of `1 << sector_shift` bytes) touched by `width` bytes at each
    /// active lane's address.
    pub fn coalesce(&mut self, addrs: &[u64; 32], mask: u32, width: u32, sector_shift: u32) {
        self.len = 0;
        let w = width.max(1) as u64;
        let mut m = mask;
        let mut sorted = true;
        let mut last = 0u64;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let a = addrs[l];
            let first = a >> sector_shift;
            let end = (a.wrapping_add(w - 1)) >> sector_shift;
            let mut s = first;
            loop {
                if self.len < MAX_SECTORS {
                    let v = s << sector_shift;
                    if self.len > 0 && v < last {
                        sorted = false;
                    }
                    if self.len == 0 || v != last {
                        self.buf[self.len] = v;
                        self.len += 1;
                        last = v;
                    }
                }
                if s >= end || s.wrapping_sub(first) >= 3 {
                    break;
                }
                s += 1;
            }
        }
        if !sorted {
            self.buf[..self.len].sort_unstable();
            let mut j = 0;
            for i in 0..self.len {
                if i == 0 || self.buf[i] != self.buf[j - 1] {
                    self.buf[j] = self.buf[i];
                    j += 1;
                }
            }
            self.len = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(addrs: impl Fn(u64) -> u64, mask: u32, width: u32) -> Sectors {
        let mut a = [0u64; 32];
        for (l, x) in a.iter_mut().enumerate() {
            *x = addrs(l as u64);
        }
        let mut s = Sectors::default();
        s.coalesce(&a, mask, width, 5);
        s
    }

    #[test]
    fn coalesced_4_byte_access_is_four_sectors_one_line() {
        let s = run(|l| 0x1000 + 4 * l, u32::MAX, 4);
        assert_eq!(s.as_slice(), &[0x1000, 0x1020, 0x1040, 0x1060]);
        assert_eq!(s.lines(128), 1);
    }

    #[test]
    fn coalesced_16_byte_access_is_sixteen_sectors_four_lines() {
        let s = run(|l| 0x2000 + 16 * l, u32::MAX, 16);
        assert_eq!(s.len(), 16);
        assert_eq!(s.lines(128), 4);
    }

    #[test]
    fn broadcast_is_one_sector() {
        let s = run(|_| 0x3004, u32::MAX, 4);
        assert_eq!(s.as_slice(), &[0x3000]);
    }

    #[test]
    fn scattered_access_is_one_sector_per_lane_sorted() {
        let s = run(|l| 0x10_0000 + (31 - l) * 4096, u32::MAX, 4);
        assert_eq!(s.len(), 32);
        assert!(s.as_slice().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(s.lines(128), 32);
    }

    #[test]
    fn unaligned_access_straddles_two_sectors() {
        let s = run(|_| 0x101c, 1, 8);
        assert_eq!(s.as_slice(), &[0x1000, 0x1020]);
    }

    #[test]
    fn inactive_lanes_are_ignored() {
        let s = run(|l| 0x1000 + 32 * l, 0x0000_000f, 4);
        assert_eq!(s.len(), 4);
    }
}

#[cfg(test)]
mod contiguous_tests {
    use super::*;

    #[test]
    fn contiguous_matches_per_lane_coalescing() {
        for (base, width) in [(0x1000u64, 4u32), (0x2010, 16), (0x3008, 8), (0x4001, 4)] {
            let mut a = [0u64; 32];
            for (l, x) in a.iter_mut().enumerate() {
                *x = base + l as u64 * width as u64;
            }
            let mut by_lane = Sectors::default();
            by_lane.coalesce(&a, u32::MAX, width, 5);
            let mut run = Sectors::default();
            run.contiguous(base, 32 * width as u64, 5);
            assert_eq!(by_lane.as_slice(), run.as_slice(), "base {base:#x} width {width}");
        }
    }
}
