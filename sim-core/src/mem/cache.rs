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

/// A way's state besides its tag (see `SectorCache::state`).
const READY: usize = 0;
/// Valid sectors in the low 32 bits, dirty sectors in the high 32.
const MASKS: usize = 1;
type State = [u64; 2];

#[inline]
fn valid_of(w: &State) -> u32 {
    w[MASKS] as u32
}

#[inline]
fn dirty_of(w: &State) -> u32 {
    (w[MASKS] >> 32) as u32
}

#[inline]
fn masks(valid: u32, dirty: u32) -> u64 {
    valid as u64 | (dirty as u64) << 32
}

/// The index in `tags` of the first way equal to `t`. Four ways are compared at a time without
/// an early exit between them, which the host vectorises: a miss in a 16-way set reads its two
/// host cache lines of tags in four steps instead of sixteen compare-and-branch rounds.
#[inline]
fn position(tags: &[u64], t: u64) -> Option<usize> {
    let mut chunks = tags.chunks_exact(4);
    let mut at = 0;
    for c in &mut chunks {
        let hits =
            (c[0] == t) as u32 | ((c[1] == t) as u32) << 1 | ((c[2] == t) as u32) << 2 | ((c[3] == t) as u32) << 3;
        if hits != 0 {
            return Some(at + hits.trailing_zeros() as usize);
        }
        at += 4;
    }
    chunks.remainder().iter().position(|&w| w == t).map(|i| at + i)
}

/// Where a line's set starts in a cache's ways: what [`SectorCache::set`] computes from the line
/// address (a hash and a division). Caches built with the same lines, associativity and hashing
/// put every line in the same set, so one `Set` serves all of them (the L2's partitions): an
/// access that walks several of them divides once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Set(usize);

/// The cache. Line addresses are byte addresses shifted right by the line size.
///
/// Each set keeps its ways in recency order, most recent first, instead of an LRU stamp per
/// way: a use moves the way to the front, a new line goes in front, and the victim is the last
/// valid way (the least recently used one, as the stamps chose). Which physical way holds a
/// line is not observable, so this is the same cache; what it saves is host memory traffic:
/// the lines a kernel reuses sit at the front of their sets, where a lookup finds them after
/// reading one host cache line. The tags are an array of their own, apart from the rest of
/// each way's state, so that a lookup that misses (it reads every tag of the set) reads 8 bytes
/// per way, not 24: the L2 of a large chip is megabytes of state, mostly out of the host's
/// caches.
pub struct SectorCache {
    sets: u64,
    assoc: usize,
    hash_sets: bool,
    /// Per way, set after set, each set in recency order: the stored tag (`tag(line)`, or
    /// `INVALID`).
    tags: Vec<u64>,
    /// The same ways' fill-ready cycle and valid and dirty masks.
    state: Vec<State>,
}

impl SectorCache {
    /// Bytes of state per line: tag and fill cycle (8 B each), valid and dirty masks.
    pub const BYTES_PER_LINE: u64 = (size_of::<u64>() + size_of::<State>()) as u64;

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
            state: vec![[0, 0]; n],
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

    /// The set of `line`, for the `*_in` calls on this cache or one of the same geometry.
    #[inline]
    pub fn set(&self, line: u64) -> Set {
        Set(self.set_of(line))
    }

    /// Whether `set` is the set of `line` here (what a shared [`Set`] relies on).
    fn holds_set(&self, set: Set, line: u64) -> bool {
        set.0 == self.set_of(line)
    }

    #[inline]
    fn find(&self, line: u64) -> Option<usize> {
        self.find_in(Set(self.set_of(line)), line)
    }

    #[inline]
    fn find_in(&self, Set(base): Set, line: u64) -> Option<usize> {
        debug_assert!(self.holds_set(Set(base), line));
        position(&self.tags[base..base + self.assoc], tag(line)).map(|w| base + w)
    }

    /// Makes way `i` the most recent of its set (whose first way is `base`); returns its new
    /// index.
    #[inline]
    fn touch(&mut self, base: usize, i: usize) -> usize {
        if i != base {
            let t = self.tags[i];
            let w = self.state[i];
            self.tags.copy_within(base..i, base + 1);
            self.state.copy_within(base..i, base + 1);
            self.tags[base] = t;
            self.state[base] = w;
        }
        base
    }

    /// Asks the host to bring the set of `line` into its caches, for a lookup soon after (see
    /// `crate::host`): all of its tags and states, since a miss reads every tag and a fill
    /// into a full set moves every way. No effect on the model.
    #[inline]
    pub fn prefetch(&self, line: u64) {
        self.prefetch_in(Set(self.set_of(line)));
    }

    /// [`SectorCache::prefetch`] of a set already found.
    #[inline]
    pub fn prefetch_in(&self, Set(base): Set) {
        crate::host::prefetch_slice(&self.tags[base..base + self.assoc]);
        crate::host::prefetch_slice(&self.state[base..base + self.assoc]);
    }

    /// Looks up a line once: its valid sectors and fill-ready cycle, refreshing its LRU
    /// position; `None` when absent.
    #[inline]
    pub fn lookup(&mut self, line: u64) -> Option<(u32, u64)> {
        self.lookup_in(Set(self.set_of(line)), line)
    }

    /// [`SectorCache::lookup`] in the line's set, already found.
    #[inline]
    pub fn lookup_in(&mut self, Set(base): Set, line: u64) -> Option<(u32, u64)> {
        debug_assert!(self.holds_set(Set(base), line));
        let w = position(&self.tags[base..base + self.assoc], tag(line))?;
        let i = self.touch(base, base + w);
        let way = &self.state[i];
        Some((valid_of(way), way[READY]))
    }

    /// Looks up `mask` sectors of `line` as [`SectorCache::lookup`] does: the sectors absent,
    /// and `ready` raised to the line's fill cycle when any of them is present (a hit waits for
    /// the fill in flight).
    #[inline]
    pub fn probe(&mut self, line: u64, mask: u32, ready: u64) -> (u32, u64) {
        self.probe_in(Set(self.set_of(line)), line, mask, ready)
    }

    /// [`SectorCache::probe`] in the line's set, already found.
    #[inline]
    pub fn probe_in(&mut self, set: Set, line: u64, mask: u32, ready: u64) -> (u32, u64) {
        match self.lookup_in(set, line) {
            Some((valid, r)) if mask & valid != 0 => (mask & !valid, ready.max(r)),
            Some((valid, _)) => (mask & !valid, ready),
            None => (mask, ready),
        }
    }

    /// Whether the line is present (any sector), without touching LRU.
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// Marks `sectors` of `line` valid (and dirty if `dirty`), ready at `ready`, allocating the
    /// line if absent. Returns the line evicted for it, if any.
    pub fn fill(&mut self, line: u64, sectors: u32, ready: u64, dirty: bool) -> Option<Victim> {
        self.fill_in(Set(self.set_of(line)), line, sectors, ready, dirty)
    }

    /// [`SectorCache::fill`] in the line's set, already found.
    pub fn fill_in(&mut self, Set(base): Set, line: u64, sectors: u32, ready: u64, dirty: bool) -> Option<Victim> {
        debug_assert!(self.holds_set(Set(base), line));
        let want = tag(line);
        let set = &self.tags[base..base + self.assoc];
        // The line itself, else an invalid way (the first), else the last (least recently
        // used) way.
        let dirty_mask = if dirty { sectors } else { 0 };
        if let Some(w) = position(set, want) {
            let i = self.touch(base, base + w);
            let way = &mut self.state[i];
            way[MASKS] |= masks(sectors, dirty_mask);
            way[READY] = way[READY].max(ready);
            return None;
        }
        let invalid = position(set, INVALID);
        let i = self.touch(base, base + invalid.unwrap_or(self.assoc - 1));
        let old = self.tags[i];
        let victim = (old != INVALID).then(|| Victim {
            line: old - 1,
            valid_sectors: valid_of(&self.state[i]),
            dirty_sectors: dirty_of(&self.state[i]),
        });
        self.tags[i] = want;
        self.state[i] = [ready, masks(sectors, dirty_mask)];
        victim
    }

    /// When the line is present with all `sectors`: its fill cycle, and it becomes the most
    /// recent of its set (a hit that copies it elsewhere); otherwise `None` and nothing
    /// changes.
    #[inline]
    pub fn take_if_present_in(&mut self, set: Set, line: u64, sectors: u32) -> Option<u64> {
        let i = self.find_in(set, line)?;
        let w = self.state[i];
        if valid_of(&w) & sectors != sectors {
            return None;
        }
        self.touch(set.0, i);
        Some(w[READY])
    }

    /// Drops the sectors of a line (a write that bypasses this cache makes them stale).
    pub fn invalidate_sectors(&mut self, line: u64, sectors: u32) {
        if let Some(i) = self.find(line) {
            let w = &mut self.state[i];
            w[MASKS] &= !masks(sectors, sectors);
            if valid_of(w) == 0 {
                self.tags[i] = INVALID;
            }
        }
    }

    /// Empties the cache (the L1 at a kernel boundary).
    pub fn invalidate_all(&mut self) {
        self.tags.fill(INVALID);
        for w in &mut self.state {
            w[MASKS] = 0;
        }
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

    /// The cache as it was written before the recency order: an LRU stamp per way, the first
    /// invalid way else the oldest as the victim. The recency-ordered cache must answer every
    /// call as this one does.
    /// (line + 1, stamp, valid, dirty, ready); line + 1 == 0: an invalid way.
    type StampedWay = (u64, u64, u32, u32, u64);

    struct Stamped {
        sets: Vec<Vec<StampedWay>>,
        tick: u64,
    }

    impl Stamped {
        fn set(&mut self, line: u64) -> &mut Vec<StampedWay> {
            let n = self.sets.len() as u64;
            &mut self.sets[(line % n) as usize]
        }
        fn lookup(&mut self, line: u64) -> Option<(u32, u64)> {
            self.tick += 1;
            let t = self.tick;
            let w = self.set(line).iter_mut().find(|w| w.0 == line + 1)?;
            w.1 = t;
            Some((w.2, w.4))
        }
        fn fill(&mut self, line: u64, sectors: u32, ready: u64, dirty: bool) -> Option<Victim> {
            self.tick += 1;
            let t = self.tick;
            let set = self.set(line);
            if let Some(w) = set.iter_mut().find(|w| w.0 == line + 1) {
                w.2 |= sectors;
                if dirty {
                    w.3 |= sectors;
                }
                w.4 = w.4.max(ready);
                w.1 = t;
                return None;
            }
            let i = match set.iter().position(|w| w.0 == 0) {
                Some(i) => i,
                None => (0..set.len()).min_by_key(|&i| set[i].1).unwrap(),
            };
            let old = set[i];
            set[i] = (line + 1, t, sectors, if dirty { sectors } else { 0 }, ready);
            (old.0 != 0).then(|| Victim { line: old.0 - 1, valid_sectors: old.2, dirty_sectors: old.3 })
        }
        fn take_if_present(&mut self, line: u64, sectors: u32) -> Option<u64> {
            self.tick += 1;
            let t = self.tick;
            let w = self.set(line).iter_mut().find(|w| w.0 == line + 1 && w.2 & sectors == sectors)?;
            w.1 = t;
            Some(w.4)
        }
        fn invalidate_sectors(&mut self, line: u64, sectors: u32) {
            if let Some(w) = self.set(line).iter_mut().find(|w| w.0 == line + 1) {
                w.2 &= !sectors;
                w.3 &= !sectors;
                if w.2 == 0 {
                    w.0 = 0;
                }
            }
        }
    }

    #[test]
    fn recency_order_answers_as_lru_stamps_do() {
        let (sets, assoc) = (8u64, 4usize);
        let mut c = SectorCache::new(sets * assoc as u64, assoc as u32, false);
        let mut r = Stamped { sets: vec![vec![(0, 0, 0, 0, 0); assoc]; sets as usize], tick: 0 };
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15u64);
        for step in 0..50_000u64 {
            let line = next(sets * 7);
            let sectors = 1 + next(15) as u32;
            match next(10) {
                0..=3 => assert_eq!(c.lookup(line), r.lookup(line), "step {step}: lookup {line}"),
                4..=7 => {
                    let (ready, dirty) = (next(1000), next(2) == 0);
                    assert_eq!(c.fill(line, sectors, ready, dirty), r.fill(line, sectors, ready, dirty), "step {step}")
                }
                8 => {
                    let set = c.set(line);
                    assert_eq!(
                        c.take_if_present_in(set, line, sectors),
                        r.take_if_present(line, sectors),
                        "step {step}"
                    )
                }
                _ => {
                    c.invalidate_sectors(line, sectors);
                    r.invalidate_sectors(line, sectors);
                }
            }
        }
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
