//! Warp scheduling policies, one per sub-core, selected by name from the config
//! (`scheduler.policy`).

/// What a policy may look at for each warp slot of its SM (indexed by slot).
pub struct WarpView<'a> {
    pub now: u64,
    /// Earliest cycle at which the slot's next instruction may issue.
    pub ready_at: &'a [u64],
    /// Launch order of the slot's warp (smaller is older).
    pub age: &'a [u64],
    /// Whether the slot waits on a long-latency (memory) result.
    pub long_wait: &'a [bool],
}

/// Orders the warps of one sub-core for issue.
///
/// Contract:
/// - `order` writes a permutation of `resident` into `out` (cleared first), highest priority
///   first. The sub-core issues the first warp in that order that can issue this cycle.
/// - It must be deterministic: the same calls give the same order.
/// - It must not allocate once `out` has reached its capacity (called every active cycle).
/// - `resident` comes in age order, oldest first (`view.age` strictly increasing): the SM appends
///   a warp when it launches, with the next age, and removal keeps the order. Policies rely on
///   it instead of sorting by age on every call.
/// - `issued` is called after the sub-core issues from `slot`; `removed` when a warp leaves,
///   after its last `issued` (a warp that issues its EXIT is told both, in that order), so a
///   policy never holds a slot whose warp is gone.
pub trait WarpScheduler {
    fn name(&self) -> &'static str;
    fn order(&mut self, resident: &[u16], view: &WarpView<'_>, out: &mut Vec<u16>);
    fn issued(&mut self, slot: u16);
    fn removed(&mut self, _slot: u16) {}
}

/// Greedy-then-oldest: keep issuing from the last warp while it can, else the oldest.
#[derive(Default)]
pub struct Gto {
    last: Option<u16>,
}

impl WarpScheduler for Gto {
    fn name(&self) -> &'static str {
        "gto"
    }
    fn order(&mut self, resident: &[u16], _view: &WarpView<'_>, out: &mut Vec<u16>) {
        out.clear();
        // The last warp, then the others as they come: oldest first (the contract's age order).
        // A `last` that is not resident (the contract rules it out) is ignored.
        let Some(p) = self.last.and_then(|g| resident.iter().position(|&s| s == g)) else {
            out.extend_from_slice(resident);
            return;
        };
        out.push(resident[p]);
        let (before, after) = (&resident[..p], &resident[p + 1..]);
        if resident.len() <= 8 {
            // A few warps (attention, GEMM): pushes cost less than two `memcpy` calls.
            before.iter().chain(after).for_each(|&s| out.push(s));
        } else {
            out.extend_from_slice(before);
            out.extend_from_slice(after);
        }
    }
    fn issued(&mut self, slot: u16) {
        self.last = Some(slot);
    }
    fn removed(&mut self, slot: u16) {
        if self.last == Some(slot) {
            self.last = None;
        }
    }
}

/// Loose round-robin: start after the warp that issued last.
#[derive(Default)]
pub struct Lrr {
    last: Option<u16>,
}

impl WarpScheduler for Lrr {
    fn name(&self) -> &'static str {
        "lrr"
    }
    fn order(&mut self, resident: &[u16], _view: &WarpView<'_>, out: &mut Vec<u16>) {
        out.clear();
        let start = match self.last {
            Some(l) => resident.iter().position(|&s| s > l).unwrap_or(0),
            None => 0,
        };
        out.extend_from_slice(&resident[start..]);
        out.extend_from_slice(&resident[..start]);
    }
    fn issued(&mut self, slot: u16) {
        self.last = Some(slot);
    }
}

/// Two-level scheduling (Narasiman et al., MICRO 2011): round-robin among a small active set;
/// a warp that starts waiting on memory drops to the pending set, and pending warps are promoted
/// oldest-first to refill the active set.
pub struct TwoLevel {
    active_size: usize,
    active: Vec<u16>,
    last: Option<u16>,
}

impl TwoLevel {
    pub fn new(active_size: u32) -> TwoLevel {
        TwoLevel { active_size: active_size.max(1) as usize, active: Vec::with_capacity(64), last: None }
    }
}

impl WarpScheduler for TwoLevel {
    fn name(&self) -> &'static str {
        "two_level"
    }
    fn order(&mut self, resident: &[u16], view: &WarpView<'_>, out: &mut Vec<u16>) {
        // Demote active warps that left or wait on long-latency results.
        self.active.retain(|&s| {
            resident.contains(&s) && !(view.long_wait[s as usize] && view.ready_at[s as usize] > view.now)
        });
        // Promote pending warps, oldest first.
        if self.active.len() < self.active_size {
            out.clear();
            out.extend(resident.iter().copied().filter(|s| !self.active.contains(s)));
            out.sort_by_key(|&s| {
                let blocked = view.long_wait[s as usize] && view.ready_at[s as usize] > view.now;
                (blocked, view.age[s as usize], s)
            });
            for &s in out.iter() {
                if self.active.len() >= self.active_size {
                    break;
                }
                self.active.push(s);
            }
        }
        out.clear();
        let start = match self.last {
            Some(l) => self.active.iter().position(|&s| s == l).map(|p| p + 1).unwrap_or(0),
            None => 0,
        };
        let start = start.min(self.active.len());
        out.extend_from_slice(&self.active[start..]);
        out.extend_from_slice(&self.active[..start]);
        // Pending warps still get a chance when every active warp is stalled.
        let n = out.len();
        out.extend(resident.iter().copied().filter(|s| !self.active.contains(s)));
        out[n..].sort_by_key(|&s| (view.age[s as usize], s));
    }
    fn issued(&mut self, slot: u16) {
        self.last = Some(slot);
    }
    fn removed(&mut self, slot: u16) {
        self.active.retain(|&s| s != slot);
        if self.last == Some(slot) {
            self.last = None;
        }
    }
}

/// The policies, by config name.
pub const POLICIES: &[&str] = &["gto", "lrr", "two_level"];

/// Builds the policy `name` (`active_warps` is used by `two_level`).
pub fn build(name: &str, active_warps: u32) -> Result<Box<dyn WarpScheduler>, String> {
    match name {
        "gto" => Ok(Box::new(Gto::default())),
        "lrr" => Ok(Box::new(Lrr::default())),
        "two_level" => Ok(Box::new(TwoLevel::new(active_warps))),
        _ => Err(format!("unknown scheduler policy `{name}` (known: {})", POLICIES.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(ready: &'a [u64], age: &'a [u64], long: &'a [bool]) -> WarpView<'a> {
        WarpView { now: 10, ready_at: ready, age, long_wait: long }
    }

    #[test]
    fn gto_prefers_last_then_oldest() {
        let ready = [0; 4];
        let age = [3, 1, 2, 0];
        let long = [false; 4];
        let mut g = Gto::default();
        let mut out = Vec::new();
        // Resident warps come oldest first (the contract).
        g.order(&[3, 1, 2, 0], &view(&ready, &age, &long), &mut out);
        assert_eq!(out, vec![3, 1, 2, 0]);
        g.issued(2);
        g.order(&[3, 1, 2, 0], &view(&ready, &age, &long), &mut out);
        assert_eq!(out, vec![2, 3, 1, 0]);
    }

    #[test]
    fn gto_on_warps_in_launch_order_puts_the_last_first() {
        let ready = [0; 5];
        let age = [0, 1, 2, 3, 4];
        let long = [false; 5];
        let mut g = Gto::default();
        let mut out = Vec::new();
        g.issued(3);
        g.order(&[0, 1, 2, 3, 4], &view(&ready, &age, &long), &mut out);
        assert_eq!(out, vec![3, 0, 1, 2, 4]);
        g.removed(3);
        g.order(&[0, 1, 2, 4], &view(&ready, &age, &long), &mut out);
        assert_eq!(out, vec![0, 1, 2, 4]);
        // A last warp that is not resident (against the contract) is left out.
        g.issued(3);
        g.order(&[0, 1, 2, 4], &view(&ready, &age, &long), &mut out);
        assert_eq!(out, vec![0, 1, 2, 4]);
        let many: Vec<u16> = (0..12).filter(|&s| s != 3).collect();
        let age: Vec<u64> = (0..12).collect();
        let (ready, long) = ([0; 12], [false; 12]);
        g.order(&many, &view(&ready, &age, &long), &mut out);
        assert_eq!(out, many);
        g.issued(7);
        g.order(&many, &view(&ready, &age, &long), &mut out);
        assert_eq!(out, [7, 0, 1, 2, 4, 5, 6, 8, 9, 10, 11]);
    }

    #[test]
    fn lrr_rotates() {
        let z = [0; 4];
        let long = [false; 4];
        let mut p = Lrr::default();
        let mut out = Vec::new();
        p.issued(1);
        p.order(&[0, 1, 2, 3], &view(&z, &z, &long), &mut out);
        assert_eq!(out, vec![2, 3, 0, 1]);
    }

    #[test]
    fn two_level_demotes_memory_waiters() {
        let ready = [100, 0, 0, 0];
        let age = [0, 1, 2, 3];
        let long = [true, false, false, false];
        let mut p = TwoLevel::new(2);
        let mut out = Vec::new();
        p.order(&[0, 1, 2, 3], &view(&ready, &age, &long), &mut out);
        assert_eq!(&out[..2], &[1, 2]);
        assert_eq!(out.len(), 4);
    }
}

#[cfg(test)]
mod registry_tests {
    #[test]
    fn config_validation_knows_exactly_these_policies() {
        assert_eq!(super::POLICIES, gpusim_configs::POLICIES);
        for p in super::POLICIES {
            assert_eq!(super::build(p, 4).unwrap().name(), *p);
        }
    }
}
