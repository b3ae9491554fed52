//! `gpusim run --timeline FILE`: the run as Chrome trace-event JSON (the format Perfetto and
//! chrome://tracing open), built on the run observer.
//!
//! - Process 1 ("SMs" or "GPCs"): a track per CTA slot of each SM (or GPC), so that CTAs
//!   resident together never overlap on one track; each CTA a complete (`X`) span named by its
//!   kernel and CTA index.
//! - Process 2 ("streams"): a track per CUDA stream holding its kernels' spans.
//! - Process 3 ("memory"): counter (`C`) tracks of DRAM bandwidth (GB/s) and L2 hit rate (% of
//!   sectors) between consecutive samples.
//!
//! Timestamps are µs at the configured SM clock (`clocks.sm`), cycle / MHz. The file is bounded
//! whatever the trace's length: at most `max_ctas` CTA spans; past that, CTAs are aggregated
//! into one span per kernel and SM (or GPC) on the unit's `aggregated` track, up to
//! [`MAX_AGGREGATES`], and beyond that only counted; kernel spans stop at [`MAX_KERNEL_SPANS`];
//! counter samples are thinned to every other one each time they reach [`MAX_SAMPLES`].
//! `otherData` says how many CTAs were drawn, aggregated and only counted.

use std::collections::BTreeMap;
use std::path::Path;

use gpusim_configs::Arch;
use gpusim_isa::KernelInfo;
use gpusim_sim_core::{CtaEvent, MemSample, Observer};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{CliError, CliResult};

/// CTA spans drawn one by one by default (`--timeline-max-ctas`).
pub const DEFAULT_MAX_CTAS: usize = 200_000;
/// Aggregated (kernel, unit) spans at most.
pub const MAX_AGGREGATES: usize = 50_000;
/// Kernel spans at most.
pub const MAX_KERNEL_SPANS: usize = 50_000;
/// Counter samples kept at most (each of two counters).
pub const MAX_SAMPLES: usize = 4096;
/// Cycles between memory samples.
pub const SAMPLE_CYCLES: u64 = 1000;
/// Track ids per unit: a unit's CTA slot `s` is track `unit × SLOT_STRIDE + s`, its aggregated
/// track `unit × SLOT_STRIDE + SLOT_STRIDE − 1`.
const SLOT_STRIDE: u32 = 4096;

const PID_UNITS: u32 = 1;
const PID_STREAMS: u32 = 2;
const PID_MEMORY: u32 = 3;

/// What one track stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TimelineBy {
    Sm,
    Gpc,
}

/// One trace event.
#[derive(Serialize)]
struct Event {
    name: String,
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    args: Value,
}

/// The observer building the timeline.
pub struct Timeline {
    by: TimelineBy,
    /// SM → GPC (the chip's mapping).
    gpc_of: Vec<u32>,
    mhz: f64,
    max_ctas: usize,
    names: BTreeMap<u32, String>,
    /// Resident CTAs: (kernel, x, y, z) → (unit slot track, launch cycle).
    open: BTreeMap<(u32, u32, u32, u32), (u32, u64)>,
    /// Per unit, which CTA slots are taken.
    slots: Vec<Vec<bool>>,
    /// Tracks that hold a span (for their names).
    used_tracks: BTreeMap<u32, ()>,
    ctas: Vec<Event>,
    kernels: Vec<Event>,
    kernel_start: BTreeMap<u32, (u64, u32)>,
    /// (kernel, unit) → (first launch, last retire, CTAs), for CTAs past the cap.
    aggregated: BTreeMap<(u32, u32), (u64, u64, u64)>,
    ctas_seen: u64,
    ctas_counted_only: u64,
    kernels_dropped: u64,
    /// Counter samples: (cycle, DRAM GB/s, L2 hit %), and the thinning stride.
    samples: Vec<(u64, f64, f64)>,
    stride: u64,
    seen_samples: u64,
    last_mem: (u64, MemSample),
}

impl Timeline {
    pub fn new(arch: &Arch, by: TimelineBy, max_ctas: usize) -> Timeline {
        Timeline {
            by,
            gpc_of: (0..arch.sm.count).map(|s| arch.sm.gpc_of(s)).collect(),
            mhz: arch.clocks.sm.mhz(),
            max_ctas,
            names: BTreeMap::new(),
            open: BTreeMap::new(),
            slots: Vec::new(),
            used_tracks: BTreeMap::new(),
            ctas: Vec::new(),
            kernels: Vec::new(),
            kernel_start: BTreeMap::new(),
            aggregated: BTreeMap::new(),
            ctas_seen: 0,
            ctas_counted_only: 0,
            kernels_dropped: 0,
            samples: Vec::new(),
            stride: 1,
            seen_samples: 0,
            last_mem: (0, MemSample::default()),
        }
    }

    fn us(&self, cycle: u64) -> f64 {
        cycle as f64 / self.mhz
    }

    fn unit(&self, sm: u32) -> u32 {
        match self.by {
            TimelineBy::Sm => sm,
            TimelineBy::Gpc => self.gpc_of.get(sm as usize).copied().unwrap_or(0),
        }
    }

    fn unit_name(&self) -> &'static str {
        match self.by {
            TimelineBy::Sm => "SM",
            TimelineBy::Gpc => "GPC",
        }
    }

    fn kernel_name(&self, id: u32) -> String {
        self.names.get(&id).cloned().unwrap_or_else(|| format!("kernel {id}"))
    }

    /// The timeline as JSON, the run's `arch` name and gpusim's version in `otherData`.
    pub fn to_json(&self, arch: &str) -> Value {
        let mut events: Vec<Value> = Vec::new();
        let meta = |pid: u32, tid: u32, name: &str, what: &str| json!({"name": what, "ph": "M", "ts": 0.0, "pid": pid, "tid": tid, "args": {"name": name}});
        let unit = self.unit_name();
        events.push(meta(PID_UNITS, 0, &format!("{unit}s"), "process_name"));
        events.push(meta(PID_STREAMS, 0, "streams", "process_name"));
        events.push(meta(PID_MEMORY, 0, "memory", "process_name"));
        for &t in self.used_tracks.keys() {
            let (u, s) = (t / SLOT_STRIDE, t % SLOT_STRIDE);
            let name =
                if s == SLOT_STRIDE - 1 { format!("{unit} {u} aggregated") } else { format!("{unit} {u} slot {s}") };
            events.push(meta(PID_UNITS, t, &name, "thread_name"));
            events.push(json!({"name": "thread_sort_index", "ph": "M", "ts": 0.0, "pid": PID_UNITS, "tid": t,
                "args": {"sort_index": t}}));
        }
        let streams: BTreeMap<u32, ()> = self.kernels.iter().map(|e| (e.tid, ())).collect();
        for &s in streams.keys() {
            events.push(meta(PID_STREAMS, s, &format!("stream {s}"), "thread_name"));
        }
        let to_value = |e: &Event| serde_json::to_value(e).expect("plain data");
        events.extend(self.kernels.iter().map(to_value));
        events.extend(self.ctas.iter().map(to_value));
        for (&(kernel, u), &(a, b, n)) in &self.aggregated {
            events.push(
                json!({"name": format!("{} ({n} CTAs aggregated)", self.kernel_name(kernel)), "cat": "cta_aggregate",
                "ph": "X", "ts": self.us(a), "dur": self.us(b) - self.us(a), "pid": PID_UNITS,
                "tid": u * SLOT_STRIDE + SLOT_STRIDE - 1, "args": {"kernel": kernel, "ctas": n}}),
            );
        }
        for &(c, gbps, hit) in &self.samples {
            let ts = self.us(c);
            events.push(json!({"name": "DRAM bandwidth", "ph": "C", "ts": ts, "pid": PID_MEMORY, "tid": 0, "args": {"GB/s": gbps}}));
            events.push(
                json!({"name": "L2 hit rate", "ph": "C", "ts": ts, "pid": PID_MEMORY, "tid": 0, "args": {"%": hit}}),
            );
        }
        let aggregated_ctas: u64 = self.aggregated.values().map(|v| v.2).sum();
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ns",
            "otherData": {
                "generator": format!("gpusim {}", env!("CARGO_PKG_VERSION")),
                "arch": arch,
                "clock_mhz": self.mhz,
                "timestamps": "µs at the configured SM clock",
                "tracks": unit,
                "ctas": self.ctas_seen,
                "cta_spans": self.ctas.len(),
                "max_cta_spans": self.max_ctas,
                "aggregated": aggregated_ctas > 0 || self.ctas_counted_only > 0,
                "ctas_aggregated": aggregated_ctas,
                "ctas_counted_only": self.ctas_counted_only,
                "kernel_spans_dropped": self.kernels_dropped,
                "sample_stride_cycles": SAMPLE_CYCLES * self.stride,
            }
        })
    }

    /// Writes the timeline to `path`.
    pub fn write(&self, path: &Path, arch: &str) -> CliResult {
        let text = serde_json::to_string(&self.to_json(arch))
            .map_err(|e| CliError::input(format!("cannot encode the timeline: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))
    }
}

impl Observer for Timeline {
    fn kernel_start(&mut self, k: &KernelInfo, cycle: u64) {
        self.names.insert(k.id, k.name.clone());
        self.kernel_start.insert(k.id, (cycle, k.stream));
    }

    fn kernel_end(&mut self, k: &KernelInfo, cycle: u64) {
        let Some((start, stream)) = self.kernel_start.remove(&k.id) else { return };
        if self.kernels.len() >= MAX_KERNEL_SPANS {
            self.kernels_dropped += 1;
            return;
        }
        self.kernels.push(Event {
            name: k.name.clone(),
            cat: "kernel",
            ph: "X",
            ts: self.us(start),
            dur: Some(self.us(cycle) - self.us(start)),
            pid: PID_STREAMS,
            tid: stream,
            args: json!({"kernel": k.id, "grid": k.grid.as_array(), "block": k.block.as_array()}),
        });
    }

    fn cta_launch(&mut self, e: &CtaEvent) {
        self.ctas_seen += 1;
        let u = self.unit(e.sm);
        let key = (e.kernel, e.cta.x, e.cta.y, e.cta.z);
        if self.ctas.len() + self.open.len() >= self.max_ctas {
            // Past the cap: aggregate (the retirement extends the span).
            if let Some(a) = self.aggregated.get_mut(&(e.kernel, u)) {
                a.2 += 1;
            } else if self.aggregated.len() < MAX_AGGREGATES {
                self.aggregated.insert((e.kernel, u), (e.cycle, e.cycle, 1));
                self.used_tracks.insert(u * SLOT_STRIDE + SLOT_STRIDE - 1, ());
            } else {
                self.ctas_counted_only += 1;
            }
            self.open.insert(key, (u32::MAX, e.cycle));
            return;
        }
        if self.slots.len() <= u as usize {
            self.slots.resize(u as usize + 1, Vec::new());
        }
        let slots = &mut self.slots[u as usize];
        let s = slots.iter().position(|t| !t).unwrap_or(slots.len());
        if s == slots.len() {
            slots.push(true);
        } else {
            slots[s] = true;
        }
        let track = u * SLOT_STRIDE + (s as u32).min(SLOT_STRIDE - 2);
        self.used_tracks.insert(track, ());
        self.open.insert(key, (track, e.cycle));
    }

    fn cta_retire(&mut self, e: &CtaEvent) {
        let key = (e.kernel, e.cta.x, e.cta.y, e.cta.z);
        let Some((track, start)) = self.open.remove(&key) else { return };
        if track == u32::MAX {
            if let Some(a) = self.aggregated.get_mut(&(e.kernel, self.unit(e.sm))) {
                a.1 = a.1.max(e.cycle);
            }
            return;
        }
        let (u, s) = (track / SLOT_STRIDE, track % SLOT_STRIDE);
        if let Some(slot) = self.slots.get_mut(u as usize).and_then(|v| v.get_mut(s as usize)) {
            *slot = false;
        }
        self.ctas.push(Event {
            name: format!("{} [{},{},{}]", self.kernel_name(e.kernel), e.cta.x, e.cta.y, e.cta.z),
            cat: "cta",
            ph: "X",
            ts: self.us(start),
            dur: Some(self.us(e.cycle) - self.us(start)),
            pid: PID_UNITS,
            tid: track,
            args: json!({"kernel": e.kernel, "cta": e.cta.as_array(), "sm": e.sm}),
        });
    }

    fn sample_interval(&self) -> Option<u64> {
        Some(SAMPLE_CYCLES)
    }

    fn memory_sample(&mut self, cycle: u64, m: &MemSample) {
        self.seen_samples += 1;
        if !self.seen_samples.is_multiple_of(self.stride) {
            return;
        }
        let (c0, m0) = self.last_mem;
        let dt = self.us(cycle) - self.us(c0);
        let bytes = m.dram_bytes - m0.dram_bytes;
        let (hits, misses) = (m.l2_hits - m0.l2_hits, m.l2_misses - m0.l2_misses);
        let gbps = if dt > 0.0 { bytes as f64 / (dt * 1e3) } else { 0.0 };
        let hit = if hits + misses > 0 { 100.0 * hits as f64 / (hits + misses) as f64 } else { 0.0 };
        self.samples.push((cycle, gbps, hit));
        self.last_mem = (cycle, *m);
        if self.samples.len() >= MAX_SAMPLES {
            // Keep every other sample; each kept one still covers the time since the previous
            // kept one only approximately (its rate was over the shorter interval).
            let kept: Vec<_> = self.samples.iter().copied().skip(1).step_by(2).collect();
            self.samples = kept;
            self.stride *= 2;
        }
    }
}
