//! A bandwidth server: requests are served first come, first served at a fixed rate. Times
//! are in 1/FRAC cycles (see [`crate::rate`]).

use crate::rate::Rate;

#[derive(Clone, Debug)]
pub struct Server {
    rate: Rate,
    free_at: u64,
    /// Bytes served and busy time, for utilisation.
    pub bytes: u64,
    pub busy: u64,
    /// Sum of waits before service began (queueing delay).
    pub waited: u64,
    pub requests: u64,
}

impl Server {
    pub fn new(bytes_per_cycle: f64) -> Server {
        Server { rate: Rate::bytes_per_cycle(bytes_per_cycle), free_at: 0, bytes: 0, busy: 0, waited: 0, requests: 0 }
    }

    /// When the server is next idle (1/FRAC cycles).
    #[inline]
    pub fn free_at(&self) -> u64 {
        self.free_at
    }

    /// Serves `bytes` arriving at `arrival`; returns when service starts.
    #[inline]
    pub fn reserve(&mut self, arrival: u64, bytes: u64) -> u64 {
        let start = self.free_at.max(arrival);
        let t = self.rate.time_for(bytes);
        self.free_at = start + t;
        self.bytes += bytes;
        self.busy += t;
        self.waited += start - arrival;
        self.requests += 1;
        start
    }
}

/// Sums servers into one [`super::LinkStats`].
pub fn summarize(name: &str, servers: &[Server]) -> super::LinkStats {
    use crate::rate::FRAC;
    super::LinkStats {
        name: name.to_string(),
        instances: servers.len() as u32,
        bytes: servers.iter().map(|s| s.bytes).sum(),
        busy_cycles: servers.iter().map(|s| s.busy).sum::<u64>() / FRAC,
        queue_cycles: servers.iter().map(|s| s.waited).sum::<u64>() / FRAC,
        requests: servers.iter().map(|s| s.requests).sum(),
    }
}

/// A resource that serves requests in any order they fit: it keeps the busy intervals ahead of
/// the current time and gives each request the earliest gap, at or after its ready time, long
/// enough for it. This is how a DRAM controller's reordering (FR-FCFS) keeps the bus busy while
/// one bank opens a row: a request that is ready earlier need not queue behind one that is
/// ready later but was handed over first.
#[derive(Clone, Debug, Default)]
pub struct Calendar {
    /// Busy intervals `[start, end)`, sorted and disjoint, none ending before the last `prune`.
    busy: std::collections::VecDeque<(u64, u64)>,
}

impl Calendar {
    /// Forgets intervals that end at or before `now` (no request can be ready before it).
    #[inline]
    pub fn prune(&mut self, now: u64) {
        while self.busy.front().is_some_and(|&(_, e)| e <= now) {
            self.busy.pop_front();
        }
    }

    /// Books `len` time units at the earliest start ≥ `ready` that fits; returns the start.
    pub fn book(&mut self, ready: u64, len: u64) -> u64 {
        let mut t = ready;
        let mut idx = self.busy.len();
        // Intervals are sorted and disjoint, so their ends are sorted too: skip those that end
        // before `ready`, then walk forward to the first gap that fits. Most requests are
        // ready after all but the last few intervals (requests are handed over in issue order
        // and reach the controller a little after it): those are searched first, the rest by
        // bisection only when the first of them ends after `ready` too.
        const RECENT: usize = 8;
        let n = self.busy.len();
        let recent = n.saturating_sub(RECENT);
        let first = if recent == 0 || self.busy[recent - 1].1 <= t {
            (recent..n).find(|&i| self.busy[i].1 > t).unwrap_or(n)
        } else {
            self.busy.partition_point(|&(_, e)| e <= t)
        };
        for i in first..self.busy.len() {
            let (s, e) = self.busy[i];
            if s >= t + len {
                idx = i;
                break;
            }
            t = t.max(e);
        }
        // Merge with neighbours that touch, to keep the list short.
        let end = t + len;
        if idx > 0 && self.busy[idx - 1].1 == t {
            self.busy[idx - 1].1 = end;
            if idx < self.busy.len() && self.busy[idx].0 == end {
                self.busy[idx - 1].1 = self.busy[idx].1;
                self.busy.remove(idx);
            }
        } else if idx < self.busy.len() && self.busy[idx].0 == end {
            self.busy[idx].0 = t;
        } else {
            self.busy.insert(idx, (t, end));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calendar books what a plain scan of every interval would: the earliest gap at or
    /// after `ready` long enough, on random requests near and far behind the latest booking.
    #[test]
    fn calendar_books_the_earliest_gap() {
        let mut c = Calendar::default();
        let mut booked: Vec<(u64, u64)> = Vec::new();
        let mut next = crate::test_rng::xorshift(0x51a7_e11a_0bad_cafeu64);
        let mut now = 0;
        for step in 0..20_000 {
            now += next(4);
            c.prune(now);
            booked.retain(|&(_, e)| e > now);
            let far = next(4) == 0;
            let ready = now + next(if far { 400 } else { 40 });
            let len = 1 + next(12);
            let mut t = ready;
            booked.sort_unstable();
            for &(s, e) in &booked {
                if s >= t + len {
                    break;
                }
                t = t.max(e);
            }
            assert_eq!(c.book(ready, len), t, "step {step}");
            booked.push((t, t + len));
        }
    }

    #[test]
    fn calendar_fills_gaps() {
        let mut c = Calendar::default();
        assert_eq!(c.book(100, 10), 100);
        // Ready earlier and fits before: goes first.
        assert_eq!(c.book(50, 10), 50);
        // Does not fit in [60, 100) only if longer than 40.
        assert_eq!(c.book(60, 45), 110);
        assert_eq!(c.book(60, 40), 60);
        c.prune(155);
        assert_eq!(c.book(155, 5), 155);
        assert_eq!(c.book(156, 5), 160);
    }
}
