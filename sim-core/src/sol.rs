//! Speed of light: how close a kernel came to the chip's peaks, in the manner of Nsight
//! Compute's "GPU Speed Of Light Throughput" section, with a one-line verdict and the data of a
//! roofline per memory level. Plain data computed from a kernel's counters and the chip; no I/O.
//!
//! Contract (docs/report-schema.md, `kernels[].sol`):
//! - A compute unit's percentage is its pipe's busy cycles over `cycles × SMs × sub-cores` (the
//!   same figure as `pipe_utilization_pct`): 100% means the pipe issued every cycle on every
//!   sub-core, whatever the instruction mix.
//! - A memory level's percentage is the bytes it moved over its peak bytes in the kernel's time:
//!   L1/shared `l1.bandwidth × SMs`, L2 `l2.slice_bandwidth × l2.slices` (both per SM cycle at
//!   the kernel's clock), HBM `hbm.bandwidth`.
//! - The verdict: memory-bound when the busiest level is at or above [`BOUND_PCT`] and not
//!   below the busiest unit; else compute-bound when the busiest unit is at or above it; else
//!   latency-bound, naming the top stall reason other than `selected` (issuing is no stall).

use gpusim_configs::Arch;
use gpusim_isa::UnitClass;
use serde::Serialize;

use crate::stats::{MemTraffic, StallCounts, StallReason};

/// Percent of peak at or above which a unit or level is said to bound the kernel (Nsight
/// Compute's SOL breakdown calls a unit high above 60%).
pub const BOUND_PCT: f64 = 60.0;

/// The compute units of the SOL table: (report key, the pipe class it reads).
pub const COMPUTE_UNITS: [(&str, UnitClass); 8] = [
    ("tensor", UnitClass::Tensor),
    ("fma", UnitClass::Fp32),
    ("fp16", UnitClass::Fp16),
    ("fp64", UnitClass::Fp64),
    ("alu", UnitClass::Int),
    ("mufu", UnitClass::Mufu),
    ("conv", UnitClass::Conv),
    ("lsu", UnitClass::Mem),
];

/// The memory levels of the SOL table, in hierarchy order.
pub const MEMORY_LEVELS: [&str; 3] = ["l1_shared", "l2", "dram"];

/// One row of the SOL table.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SolEntry {
    /// A key of [`COMPUTE_UNITS`] or [`MEMORY_LEVELS`].
    pub name: String,
    /// Throughput as a percentage of the peak.
    pub pct: f64,
}

/// What bounds the kernel.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Memory,
    Compute,
    Latency,
}

/// One memory level of the roofline: the kernel's arithmetic intensity against that level.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RooflineLevel {
    /// A key of [`MEMORY_LEVELS`].
    pub level: String,
    /// Bytes the level moved.
    pub bytes: u64,
    /// FLOP per byte moved; `None` when the level moved nothing (infinite intensity).
    pub intensity: Option<f64>,
    /// The level's peak bandwidth, B/s.
    pub peak_bytes_per_s: f64,
}

/// A kernel's roofline data.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Roofline {
    /// FLOP/s achieved (CUDA-core plus tensor).
    pub flops_per_s: f64,
    /// The compute ceiling: `tensor` for a kernel that ran tensor FLOPs, else `fma`.
    pub ceiling: String,
    /// The ceiling's peak FLOP/s. Tensor: the kernel's tensor FLOP/s over the tensor pipe's busy
    /// fraction, the peak at the kernel's own mix of MMA shapes and types. FMA: 2 FLOP per lane
    /// (`32 / pipes.fp32.issue_interval` lanes per sub-core) × sub-cores × SMs × clock.
    pub peak_flops_per_s: f64,
    pub levels: Vec<RooflineLevel>,
}

/// The speed-of-light section of a kernel.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SpeedOfLight {
    /// Every unit of [`COMPUTE_UNITS`], in that order.
    pub compute: Vec<SolEntry>,
    /// Every level of [`MEMORY_LEVELS`], in that order.
    pub memory: Vec<SolEntry>,
    pub bound: Bound,
    /// The busiest level (memory-bound), the busiest unit (compute-bound) or the top stall
    /// reason (latency-bound; `none` when no warp stalled).
    pub limiter: String,
    /// The limiter's percentage: of peak, or of resident warp-cycles for a stall reason.
    pub limiter_pct: f64,
    /// The one-line verdict, e.g. `memory-bound: HBM at 91% of peak`.
    pub verdict: String,
    pub roofline: Roofline,
}

/// The counters of a kernel the SOL section reads.
pub(crate) struct SolInput<'a> {
    pub cycles: u64,
    /// The kernel's clock, Hz.
    pub clock_hz: f64,
    pub pipe_busy: &'a [u64; UnitClass::ALL.len()],
    pub traffic: &'a MemTraffic,
    pub stalls: &'a StallCounts,
    pub resident_warp_cycles: u64,
    pub flops: u64,
    pub tensor_flops: u64,
}

/// The label a verdict uses for a unit or level key.
pub fn label(key: &str) -> &str {
    match key {
        "l1_shared" => "L1/shared",
        "l2" => "L2",
        "dram" => "HBM",
        "fma" => "FMA (fp32)",
        "alu" => "ALU (int)",
        "lsu" => "LSU",
        other => other,
    }
}

fn pct(num: f64, den: f64) -> f64 {
    if den > 0.0 { 100.0 * num / den } else { 0.0 }
}

/// The busiest entry; on a tie the first in table order.
fn busiest(v: &[SolEntry]) -> &SolEntry {
    v.iter().fold(&v[0], |best, e| if e.pct > best.pct { e } else { best })
}

pub(crate) fn speed_of_light(arch: &Arch, k: &SolInput) -> SpeedOfLight {
    let sms = arch.sm.count as f64;
    let sub_cycles = k.cycles as f64 * sms * arch.sm.sub_cores as f64;
    let secs = if k.clock_hz > 0.0 { k.cycles as f64 / k.clock_hz } else { 0.0 };
    let compute: Vec<SolEntry> = COMPUTE_UNITS
        .iter()
        .map(|(name, c)| SolEntry { name: name.to_string(), pct: pct(k.pipe_busy[c.index()] as f64, sub_cycles) })
        .collect();
    let t = k.traffic;
    let level_bytes = [t.l1.bytes + t.shared.bytes, t.l2.bytes, t.dram.bytes];
    let peak_bps = [
        arch.l1.bandwidth.0 * sms * k.clock_hz,
        arch.l2.slice_bandwidth.0 * arch.l2.slices as f64 * k.clock_hz,
        arch.hbm.bandwidth.0,
    ];
    let memory: Vec<SolEntry> = MEMORY_LEVELS
        .iter()
        .zip(level_bytes.iter().zip(peak_bps))
        .map(|(name, (b, p))| SolEntry { name: name.to_string(), pct: pct(*b as f64, p * secs) })
        .collect();
    let (cu, mem) = (busiest(&compute).clone(), busiest(&memory).clone());
    let (bound, limiter, limiter_pct, verdict) = if mem.pct >= BOUND_PCT && mem.pct >= cu.pct {
        let v = format!("memory-bound: {} at {:.0}% of peak", label(&mem.name), mem.pct);
        (Bound::Memory, mem.name.clone(), mem.pct, v)
    } else if cu.pct >= BOUND_PCT {
        let v = format!("compute-bound: {} pipe at {:.0}% of peak", label(&cu.name), cu.pct);
        (Bound::Compute, cu.name.clone(), cu.pct, v)
    } else {
        let top = StallReason::ALL.iter().filter(|r| **r != StallReason::Selected && k.stalls.get(**r) > 0).fold(
            None::<StallReason>,
            |best, r| match best {
                Some(b) if k.stalls.get(b) >= k.stalls.get(*r) => Some(b),
                _ => Some(*r),
            },
        );
        let (name, share) = match top {
            Some(r) => (r.name().to_string(), pct(k.stalls.get(r) as f64, k.resident_warp_cycles as f64)),
            None => ("none".to_string(), 0.0),
        };
        let v = format!(
            "latency-bound: neither above {BOUND_PCT:.0}% of peak (compute {} {:.0}%, memory {} {:.0}%), top stall {name} ({share:.0}% of warp-cycles)",
            label(&cu.name),
            cu.pct,
            label(&mem.name),
            mem.pct
        );
        (Bound::Latency, name, share, v)
    };
    let per_sec = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    let tensor_busy = k.pipe_busy[UnitClass::Tensor.index()] as f64;
    let (ceiling, peak_flops_per_s) = if k.tensor_flops > 0 && tensor_busy > 0.0 {
        ("tensor", per_sec(k.tensor_flops as f64) * sub_cycles / tensor_busy)
    } else {
        let interval = arch.pipes.get(UnitClass::Fp32).issue_interval.0.max(1) as f64;
        ("fma", 2.0 * (32.0 / interval) * arch.sm.sub_cores as f64 * sms * k.clock_hz)
    };
    let levels = MEMORY_LEVELS
        .iter()
        .zip(level_bytes.iter().zip(peak_bps))
        .map(|(name, (b, p))| RooflineLevel {
            level: name.to_string(),
            bytes: *b,
            intensity: if *b > 0 { Some(k.flops as f64 / *b as f64) } else { None },
            peak_bytes_per_s: p,
        })
        .collect();
    SpeedOfLight {
        compute,
        memory,
        bound,
        limiter,
        limiter_pct,
        verdict,
        roofline: Roofline {
            flops_per_s: per_sec(k.flops as f64),
            ceiling: ceiling.to_string(),
            peak_flops_per_s,
            levels,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CYCLES: u64 = 10_000;

    fn run(arch: &Arch, busy: &[(UnitClass, f64)], dram_frac: f64, stalls: &[(StallReason, u64)]) -> SpeedOfLight {
        let sub = CYCLES as f64 * arch.sm.count as f64 * arch.sm.sub_cores as f64;
        let mut pipe_busy = [0u64; UnitClass::ALL.len()];
        for (c, f) in busy {
            pipe_busy[c.index()] = (f * sub) as u64;
        }
        let clock = arch.clocks.sm.0 as f64;
        let mut traffic = MemTraffic::default();
        traffic.dram.bytes = (dram_frac * arch.hbm.bandwidth.0 * CYCLES as f64 / clock) as u64;
        let mut st = StallCounts::default();
        for (r, n) in stalls {
            st.add(*r, *n);
        }
        let input = SolInput {
            cycles: CYCLES,
            clock_hz: clock,
            pipe_busy: &pipe_busy,
            traffic: &traffic,
            stalls: &st,
            resident_warp_cycles: st.total(),
            flops: 1_000_000,
            tensor_flops: 0,
        };
        speed_of_light(arch, &input)
    }

    fn h100() -> Arch {
        gpusim_configs::load_preset("h100-sxm5-80gb").unwrap()
    }

    #[test]
    fn verdicts_follow_the_busiest_unit_and_level() {
        let a = h100();
        let c = run(&a, &[(UnitClass::Fp32, 0.9)], 0.2, &[]);
        assert_eq!((c.bound, c.limiter.as_str()), (Bound::Compute, "fma"));
        assert_eq!(c.verdict, "compute-bound: FMA (fp32) pipe at 90% of peak");
        let m = run(&a, &[(UnitClass::Fp32, 0.5)], 0.95, &[]);
        assert_eq!((m.bound, m.limiter.as_str()), (Bound::Memory, "dram"));
        assert!(m.verdict.starts_with("memory-bound: HBM at 9"), "{}", m.verdict);
        let l = run(
            &a,
            &[(UnitClass::Fp32, 0.3)],
            0.3,
            &[(StallReason::Selected, 90), (StallReason::LongScoreboard, 60), (StallReason::Barrier, 10)],
        );
        assert_eq!((l.bound, l.limiter.as_str()), (Bound::Latency, "long_scoreboard"));
        assert!((l.limiter_pct - 37.5).abs() < 1e-9, "{}", l.limiter_pct);
        assert!(l.verdict.contains("top stall long_scoreboard (38% of warp-cycles)"), "{}", l.verdict);
        let idle = run(&a, &[], 0.0, &[]);
        assert_eq!((idle.bound, idle.limiter.as_str()), (Bound::Latency, "none"));
    }

    #[test]
    fn tables_are_complete_and_the_fma_ceiling_is_the_lanes_rate() {
        let a = h100();
        let s = run(&a, &[(UnitClass::Fp32, 0.5)], 0.5, &[]);
        let names: Vec<&str> = s.compute.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, COMPUTE_UNITS.map(|u| u.0));
        assert_eq!(s.memory.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), MEMORY_LEVELS);
        assert!((s.compute[1].pct - 50.0).abs() < 1e-6 && (s.memory[2].pct - 50.0).abs() < 0.01);
        let lanes = 32.0 / a.pipes.get(UnitClass::Fp32).issue_interval.0 as f64;
        let peak = 2.0 * lanes * a.sm.sub_cores as f64 * a.sm.count as f64 * a.clocks.sm.0 as f64;
        assert_eq!(s.roofline.ceiling, "fma");
        assert!((s.roofline.peak_flops_per_s - peak).abs() < 1.0);
        // No L1 or L2 bytes: infinite intensity is null, not a number.
        assert_eq!(s.roofline.levels[0].intensity, None);
        assert!(s.roofline.levels[2].intensity.is_some());
    }
}
