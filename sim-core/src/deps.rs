//! When kernels may start: the order of their streams plus their explicit dependencies.
//!
//! Each kernel keeps the number of its predecessors that have not finished and the list of its
//! successors, so finishing a kernel costs its successors, never the number of kernels the run
//! has seen: a trace of a hundred thousand kernels pays nothing per finished one.

use std::collections::BTreeMap;

/// The dependency graph of the kernels pulled so far. Kernel indices are dense and come in
/// launch order; a kernel depends only on earlier ones.
#[derive(Default)]
pub struct Deps {
    /// Per kernel: predecessors not finished yet.
    pending: Vec<u32>,
    /// Per kernel: the latest end among its finished predecessors, and which one that was.
    latest: Vec<Option<(u64, u32)>>,
    /// Per kernel: kernels waiting for it.
    succ: Vec<Vec<u32>>,
    /// Per stream: the last kernel added to it.
    last_of_stream: BTreeMap<u32, u32>,
}

impl Deps {
    /// Adds kernel `idx` (the next index) on `stream` with explicit dependencies `deps` (indices
    /// of earlier kernels; later or repeated ones are ignored). `end_of(d)` is the end cycle of
    /// kernel `d` if it has finished. Returns whether the kernel may start now (every
    /// predecessor finished).
    pub fn add(&mut self, idx: usize, stream: u32, deps: &[u32], end_of: impl Fn(usize) -> Option<u64>) -> bool {
        debug_assert_eq!(idx, self.pending.len());
        let mut preds: Vec<u32> = deps.iter().copied().filter(|&d| (d as usize) < idx).collect();
        if let Some(prev) = self.last_of_stream.insert(stream, idx as u32) {
            preds.push(prev);
        }
        preds.sort_unstable();
        preds.dedup();
        let mut pending = 0;
        let mut latest: Option<(u64, u32)> = None;
        for &p in &preds {
            match end_of(p as usize) {
                Some(end) => latest = later(latest, (end, p)),
                None => {
                    pending += 1;
                    self.succ[p as usize].push(idx as u32);
                }
            }
        }
        self.pending.push(pending);
        self.latest.push(latest);
        self.succ.push(Vec::new());
        pending == 0
    }

    /// Kernel `idx` finished at `end`: appends the kernels that may now start to `ready`, in
    /// launch order.
    pub fn finish(&mut self, idx: usize, end: u64, ready: &mut Vec<u32>) {
        let succ = std::mem::take(&mut self.succ[idx]);
        for &s in &succ {
            let s = s as usize;
            self.latest[s] = later(self.latest[s], (end, idx as u32));
            self.pending[s] -= 1;
            if self.pending[s] == 0 {
                ready.push(s as u32);
            }
        }
        ready.sort_unstable();
    }

    /// The end of the kernel's last predecessor to finish, and its index; `None` when it has no
    /// predecessor (or none finished yet).
    pub fn latest_predecessor(&self, idx: usize) -> Option<(u64, u32)> {
        self.latest[idx]
    }
}

/// The later of two (end, kernel) pairs; on a tie the earlier kernel, so the choice is
/// deterministic.
fn later(a: Option<(u64, u32)>, b: (u64, u32)) -> Option<(u64, u32)> {
    match a {
        Some(x) if x.0 > b.0 || (x.0 == b.0 && x.1 < b.1) => Some(x),
        _ => Some(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_order_and_explicit_deps() {
        let mut d = Deps::default();
        let none = |_| None;
        assert!(d.add(0, 0, &[], none));
        assert!(d.add(1, 1, &[], none), "another stream starts at once");
        assert!(!d.add(2, 0, &[], none), "waits for kernel 0, its stream's previous");
        assert!(!d.add(3, 1, &[0, 0, 1], none), "waits for 0 and 1, each counted once");
        let mut ready = Vec::new();
        d.finish(0, 100, &mut ready);
        assert_eq!(ready, vec![2]);
        ready.clear();
        d.finish(1, 90, &mut ready);
        assert_eq!(ready, vec![3]);
        assert_eq!(d.latest_predecessor(3), Some((100, 0)), "kernel 0 ended last: it gated kernel 3");
        assert_eq!(d.latest_predecessor(2), Some((100, 0)));
    }

    #[test]
    fn finished_predecessors_count_only_their_end() {
        let mut d = Deps::default();
        assert!(d.add(0, 0, &[], |_| None));
        assert!(d.add(1, 0, &[], |_| Some(50)));
        assert_eq!(d.latest_predecessor(1), Some((50, 0)));
    }
}
