//! A set-associative, sectored cache with LRU replacement: tags per line, a valid and a dirty
//! bit per sector, and the cycle each line's fill completes (so a hit on a line still being
//! filled waits for the fill, which is how MSHR merging shows up in a timestamp model).

/// A line evicted to make room.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Victim {
    pub line: u64,
    pub valid_sectors: u32,
    pub dirty_sectors: u32,
}

/// A way's tag when it holds no line. Tags are stored as `line + 1` so that an empty cache is
/// all zeros: its arrays come from zeroed allocations, which the OS backs with memory only as
/// lines are touched, so a large L2 costs what the run uses of it, not its capacity.
const INVALID: u64 = 0;

/// The stored tag of a line (line addresses are byte addresses shifted right by at least 4
/// bits, so `line + 1` never wraps).
#[inline]
fn tag(line: u64) -> u64 {
    line + 1
}

/// The cache. Line addresses are byte addresses shifted right by the line size.
pub struct SectorCache {
    sets: u64,
    assoc: usize,
    hash_sets: bool,
    tags: Vec<u64>,
    lru: Vec<u64>,
    ready: Vec<u64>,
    valid: Vec<u32>,
    dirty: Vec<u32>,
    tick: u64,
}

impl SectorCache {
    /// Bytes of state per line: tag, LRU stamp and fill cycle (8 B each), valid and dirty masks.
    pub const BYTES_PER_LINE: u64 = 3 * 8 + 2 * 4;

    /// `lines` total lines (rounded down to whole sets), `assoc` ways. With `hash_sets` the set
    /// index is an XOR-fold of the line address (as L2s do against strided conflicts).
    pub fn new(lines: u64, assoc: u32, hash_sets: bool) -> SectorCache {
        let assoc = assoc.max(1) as usize;
        let sets = (lines / assoc as u64).max(1);
        let n = (sets as usize) * assoc;
        SectorCache {
            sets,
            assoc,
            hash_sets,
            tags: vec![INVALID; n], // zeroed: see `INVALID`
            lru: vec![0; n],
            ready: vec![0; n],
            valid: vec![0; n],
            dirty: vec![0; n],
            tick: 0,
        }
    }

    pub fn lines(&self) -> u64 {
        self.sets * self.assoc as u64
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        let x = if self.hash_sets { line ^ (line >> 11) ^ (line >> 23) } else { line };
        (x % self.sets) as usize * self.assoc
    }

    #[inline]
    fn find(&self, line: u64) -> Option<usize> {
        let base = self.set_of(line);
        let t = tag(line);
        (base..base + self.assoc).find(|&i| self.tags[i] == t)
    }

    /// Looks up a line once: its valid sectors and fill-ready cycle, refreshing its LRU
    /// position; `None` when absent.
    #[inline]
    pub fn lookup(&mut self, line: u64) -> Option<(u32, u64)> {
        let i = self.find(line)?;
        self.tick += 1;
        self.lru[i] = self.tick;
        Some((self.valid[i], self.ready[i]))
    }

    /// Whether the line is present (any sector), without touching LRU.
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// Marks `sectors` of `line` valid (and dirty if `dirty`), ready at `ready`, allocating the
    /// line if absent. Returns the line evicted for it, if any.
    pub fn fill(&mut self, line: u64, sectors: u32, ready: u64, dirty: bool) -> Option<Victim> {
        self.tick += 1;
        let base = self.set_of(line);
        let end = base + self.assoc;
        // One pass over the set: the line itself, else the first invalid way, else the LRU way.
        let tags = &self.tags[base..end];
        let lru = &self.lru[base..end];
        let mut found = None;
        let mut invalid = None;
        let mut oldest = 0;
        let want = tag(line);
        for w in 0..tags.len() {
            let t = tags[w];
            if t == want {
                found = Some(w);
                break;
            }
            if t == INVALID {
                if invalid.is_none() {
                    invalid = Some(w);
                }
            } else if lru[w] < lru[oldest] || tags[oldest] == INVALID {
                oldest = w;
            }
        }
        if let Some(w) = found {
            let i = base + w;
            self.valid[i] |= sectors;
            if dirty {
                self.dirty[i] |= sectors;
            }
            self.ready[i] = self.ready[i].max(ready);
            self.lru[i] = self.tick;
            return None;
        }
        let way = base + invalid.unwrap_or(oldest);
        let victim = (self.tags[way] != INVALID).then(|| Victim {
            line: self.tags[way] - 1,
            valid_sectors: self.valid[way],
            dirty_sectors: self.dirty[way],
        });
        self.tags[way] = want;
        self.valid[way] = sectors;
        self.dirty[way] = if dirty { sectors } else { 0 };
        self.ready[way] = ready;
        self.lru[way] = self.tick;
        victim
    }

    /// The cycle the line's pending fill completes, if the line is present with all `sectors`.
    pub fn ready_if_present(&self, line: u64, sectors: u32) -> Option<u64> {
        self.find(line).filter(|&i| self.valid[i] & sectors == sectors).map(|i| self.ready[i])
    }

    /// Drops the sectors of a line (a write that bypasses this cache makes them stale).
    pub fn invalidate_sectors(&mut self, line: u64, sectors: u32) {
        if let Some(i) = self.find(line) {
            self.valid[i] &= !sectors;
            self.dirty[i] &= !sectors;
            if self.valid[i] == 0 {
                self.tags[i] = INVALID;
            }
        }
    }

    /// Empties the cache (the L1 at a kernel boundary).
    pub fn invalidate_all(&mut self) {
        self.tags.fill(INVALID);
        self.valid.fill(0);
        self.dirty.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_after_fill_and_evicts_lru() {
        let mut c = SectorCache::new(4, 2, false); // 2 sets × 2 ways
        assert_eq!(c.lookup(0), None);
        assert!(c.fill(0, 0b1, 10, false).is_none());
        // Present with sector 0 valid (sector 1 not), ready at cycle 10.
        assert_eq!(c.lookup(0), Some((0b1, 10)));
        c.fill(2, 0b1, 0, true); // same set (even lines)
        c.lookup(0); // 0 is now most recent
        let v = c.fill(4, 0b1, 0, false).unwrap();
        assert_eq!(v, Victim { line: 2, valid_sectors: 1, dirty_sectors: 1 });
        assert!(c.contains(0) && c.contains(4) && !c.contains(2));
    }

    #[test]
    fn cyclic_sweep_larger_than_the_cache_always_misses() {
        let mut c = SectorCache::new(64, 4, true);
        let mut misses = 0;
        for pass in 0..3 {
            for line in 0..80u64 {
                if c.lookup(line).is_none_or(|(valid, _)| valid & 1 == 0) {
                    if pass > 0 {
                        misses += 1;
                    }
                    c.fill(line, 1, 0, false);
                }
            }
        }
        assert!(misses > 100, "{misses}");
    }
}
