//! The result of a run as plain data (docs/report-schema.md). Printing and JSON writing live in
//! the CLI; this module only computes.

use std::collections::BTreeMap;

use gpusim_configs::{Arch, Hertz};
use gpusim_isa::UnitClass;
use serde::Serialize;

use crate::cta_groups::GroupTimes;
use crate::kernel_run::KernelRun;
use crate::occupancy::Limiter;
use crate::sol::{SolInput, SpeedOfLight, speed_of_light};
use crate::stats::{MemTraffic, StallReason};

/// Schema version of [`Report`]'s JSON form.
pub const REPORT_SCHEMA_VERSION: u32 = 5;

/// A whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub schema_version: u32,
    pub arch: String,
    pub memory_model: String,
    /// How the kernels were launched (`sim.launch`): `eager` or `graph` (one CUDA graph), which
    /// set the gaps between dependent kernels.
    pub launch: String,
    /// The configured SM clock (`clocks.sm`); a kernel under tensor load may run below it
    /// ([`KernelReport::clock_mhz`]).
    pub sm_clock_mhz: f64,
    /// From the first kernel's start to the last kernel's end, in SM cycles.
    pub total_cycles: u64,
    pub time_us: f64,
    pub warp_instructions: u64,
    pub flops: u64,
    pub tflops: f64,
    pub kernels: Vec<KernelReport>,
    /// Each stream that ran a kernel, in stream order.
    pub streams: Vec<StreamReport>,
    /// The chain of kernels that set the run's end: the last kernel to finish, preceded by the
    /// predecessor whose end held back its launch, and so on (kernel ids, in time order).
    pub critical_path: Vec<u32>,
    /// Utilisation and queueing of the memory system's links over the whole run.
    pub links: Vec<crate::mem::LinkStats>,
    /// Per group name (`expert`), the groups' CTA time over every kernel with that grouping:
    /// a MoE layer's expert imbalance. Absent from the JSON when no kernel has CTA groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cta_groups: Vec<GroupSummary>,
    /// Set when the run did not complete: what the report holds is what was done until then.
    /// Absent from the JSON of a complete run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
}

/// Why and where a run stopped early.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Partial {
    /// `interrupted` (SIGINT/SIGTERM) or `error` (a later kernel failed; only finished kernels
    /// are in the report).
    pub reason: String,
    pub at_cycle: u64,
    /// Kernels that had started but not finished, reported up to `at_cycle`.
    pub cut_short: Vec<u32>,
}

/// One CUDA stream over the run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StreamReport {
    pub stream: u32,
    pub kernels: u32,
    /// Cycles during which at least one of the stream's kernels ran (launch to last CTA).
    pub busy_cycles: u64,
    /// `busy_cycles` at the configured SM clock.
    pub busy_us: f64,
    pub first_cycle: u64,
    pub last_cycle: u64,
}

/// One kernel.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KernelReport {
    pub id: u32,
    pub name: String,
    /// CUDA stream the kernel ran on.
    pub stream: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub ctas: u64,
    pub start_cycle: u64,
    pub end_cycle: u64,
    pub cycles: u64,
    /// `cycles` at `clock_mhz`.
    pub time_us: f64,
    /// SM clock the kernel ran at: `clocks.sm`, lowered under tensor load when the chip has a
    /// power-limited clock (`clocks.sm_tensor_load`; `Clocks::effective_sm`).
    pub clock_mhz: f64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    /// Warp instructions per cycle per SM, over the cycles an SM held a CTA of the kernel.
    pub ipc: f64,
    /// CUDA-core plus tensor FLOPs executed.
    pub flops: u64,
    pub tensor_flops: u64,
    pub tflops: f64,
    pub occupancy: OccupancyReport,
    pub memory: MemoryReport,
    /// Busy cycles of each pipe class over the kernel's duration on every sub-core, in percent.
    pub pipe_utilization_pct: BTreeMap<String, f64>,
    /// Warp-cycles per stall reason (Nsight Compute names); they add up to `resident_warp_cycles`.
    pub stalls: BTreeMap<String, u64>,
    pub resident_warp_cycles: u64,
    /// Opcodes not in the opcode table, with how many warp instructions used them.
    pub unknown_opcodes: BTreeMap<String, u64>,
    /// The stretch during which every CTA slot stayed busy; `None` for a grid of one wave.
    pub steady: Option<SteadyWindow>,
    /// Speed of light: each compute unit and memory level as a percentage of its peak, the
    /// bottleneck verdict and the roofline data ([`crate::sol`]).
    pub sol: SpeedOfLight,
    /// Set when the kernel was sampled (`gpusim run --sample`): what was skipped and
    /// extrapolated, and the error estimate. Absent from the JSON of a detailed kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<crate::sample::Sampled>,
    /// Per-group CTA times when the kernel's CTAs are grouped (a grouped GEMM's experts).
    /// Absent from the JSON of an ungrouped kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<KernelGroups>,
}

/// The CTA groups of one kernel ([`crate::cta_groups`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KernelGroups {
    /// What a group is (`expert`).
    pub name: String,
    /// Every group that ran a CTA, by group value.
    pub groups: Vec<GroupReport>,
    #[serde(flatten)]
    pub summary: Imbalance,
    /// CTAs of groups past the first `cta_groups::MAX_GROUPS`, not broken down.
    pub untracked_ctas: u64,
}

/// How uneven a set of groups was: the busiest and the last to finish.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Imbalance {
    /// The group with the most CTA cycles, its cycles and their share of all groups' (%).
    pub busiest: i64,
    pub busiest_cta_cycles: u64,
    pub busiest_share_pct: f64,
    /// The busiest group's CTA cycles over the mean group's (1 = perfectly even).
    pub imbalance: f64,
    /// The group whose last CTA ended last, and when.
    pub straggler: i64,
    pub straggler_end_cycle: u64,
}

/// One group of a kernel.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupReport {
    pub group: i64,
    pub ctas: u64,
    /// Launch-to-retirement cycles of its CTAs, summed.
    pub cta_cycles: u64,
    /// Its share of all groups' CTA cycles (%).
    pub share_pct: f64,
    pub first_start_cycle: u64,
    pub last_end_cycle: u64,
}

/// One group name over the run: each group's CTA cycles summed over the kernels with that
/// grouping (a MoE layer's gate/up and down GEMMs).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupSummary {
    pub name: String,
    /// Kernels (ids) with this grouping.
    pub kernels: Vec<u32>,
    /// Groups that ran a CTA in any of them.
    pub groups: u64,
    #[serde(flatten)]
    pub summary: Imbalance,
}

/// The part of a kernel's run between its ramp-up and its tail: from the first CTA's
/// retirement to the first moment a CTA slot freed with no CTA left in the grid to fill it.
/// Throughput over it is what a long grid of the same CTAs sustains, without the partial last
/// wave a short grid ends with: a benchmark that launches hundreds of waves (RRZE's 200 000
/// CTAs) is compared with this, not with the whole kernel's average. Bytes are counted when
/// the accesses issue, so a window not much longer than the time loads spend queued (thousands
/// of cycles in a DRAM-bound kernel) reads high.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SteadyWindow {
    pub start_cycle: u64,
    pub end_cycle: u64,
    /// Bytes the warps' global/local accesses asked for within the window.
    pub requested_bytes: u64,
    pub l2_bytes: u64,
    pub dram_bytes: u64,
}

impl SteadyWindow {
    pub fn cycles(&self) -> u64 {
        self.end_cycle - self.start_cycle
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OccupancyReport {
    pub ctas_per_sm: u32,
    pub warps_per_cta: u32,
    pub limiter: Limiter,
    /// Resident warps per SM over the warp limit, as the occupancy calculator gives it (percent).
    pub theoretical_pct: f64,
    /// Average resident warps while the SM held the kernel, over the warp limit (percent).
    pub achieved_pct: f64,
    /// CTAs over what one full wave of the chip holds.
    pub waves: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemoryReport {
    #[serde(flatten)]
    pub traffic: MemTraffic,
    /// DRAM bytes over the kernel time, GB/s.
    pub dram_gbps: f64,
    /// DRAM bandwidth over the datasheet peak, percent.
    pub dram_utilization_pct: f64,
}

fn us(cycles: u64, clock: Hertz) -> f64 {
    cycles as f64 / clock.0 as f64 * 1e6
}

fn kernel_report(arch: &Arch, k: &KernelRun) -> KernelReport {
    let start = k.start.unwrap_or(0);
    let cycles = k.end.saturating_sub(start);
    let st = &k.stats;
    let sub_cycles = (cycles as f64) * arch.sm.count as f64 * arch.sm.sub_cores as f64;
    let tensor_busy = st.pipe_busy[UnitClass::Tensor.index()] as f64;
    let clock = arch.clocks.effective_sm(if sub_cycles > 0.0 { tensor_busy / sub_cycles } else { 0.0 });
    let time_us = us(cycles, clock);
    let flops = st.cuda_core_flops + st.tensor_flops;
    let secs = time_us * 1e-6;
    let per_sec = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    let pipe_utilization_pct = UnitClass::ALL
        .iter()
        .filter(|c| st.pipe_busy[c.index()] > 0)
        .map(|c| {
            (
                c.name().to_string(),
                if sub_cycles > 0.0 { 100.0 * st.pipe_busy[c.index()] as f64 / sub_cycles } else { 0.0 },
            )
        })
        .collect();
    let stalls = StallReason::ALL
        .iter()
        .filter(|r| st.stalls.get(**r) > 0)
        .map(|r| (r.name().to_string(), st.stalls.get(*r)))
        .collect();
    let mut unknown_opcodes = BTreeMap::new();
    for (i, d) in k.descs.iter().enumerate() {
        if !d.known && st.op_counts[i] > 0 {
            *unknown_opcodes.entry(d.mnemonic.clone()).or_insert(0) += st.op_counts[i];
        }
    }
    let occ = &k.occupancy;
    let resident = st.resident_warp_cycles;
    let max_warps = arch.sm.max_warps as f64;
    let dram_gbps = per_sec(st.traffic.dram.bytes as f64) / 1e9;
    let sol = speed_of_light(
        arch,
        &SolInput {
            cycles,
            clock_hz: clock.0 as f64,
            pipe_busy: &st.pipe_busy,
            traffic: &st.traffic,
            stalls: &st.stalls,
            resident_warp_cycles: resident,
            flops,
            tensor_flops: st.tensor_flops,
        },
    );
    KernelReport {
        id: k.info.id,
        name: k.info.name.clone(),
        stream: k.info.stream,
        grid: k.info.grid.as_array(),
        block: k.info.block.as_array(),
        ctas: k.ctas_done + k.sampled.as_ref().map_or(0, |s| s.skipped_ctas),
        start_cycle: start,
        end_cycle: k.end,
        cycles,
        time_us,
        clock_mhz: clock.mhz(),
        warp_instructions: st.warp_insts,
        thread_instructions: st.thread_insts,
        ipc: if st.sm_active_cycles > 0 { st.warp_insts as f64 / st.sm_active_cycles as f64 } else { 0.0 },
        flops,
        tensor_flops: st.tensor_flops,
        tflops: per_sec(flops as f64) / 1e12,
        occupancy: OccupancyReport {
            ctas_per_sm: occ.ctas_per_sm,
            warps_per_cta: occ.warps_per_cta,
            limiter: occ.limiter,
            theoretical_pct: 100.0 * occ.fraction(arch),
            achieved_pct: if st.sm_active_cycles > 0 {
                100.0 * resident as f64 / (st.sm_active_cycles as f64 * max_warps)
            } else {
                0.0
            },
            waves: k.info.num_ctas() as f64 / (occ.ctas_per_sm as f64 * arch.sm.count as f64),
        },
        memory: MemoryReport {
            traffic: st.traffic,
            dram_gbps,
            dram_utilization_pct: 100.0 * dram_gbps * 1e9 / arch.hbm.bandwidth.0,
        },
        pipe_utilization_pct,
        stalls,
        resident_warp_cycles: resident,
        unknown_opcodes,
        steady: match (k.first_retire, k.first_idle_slot) {
            (Some(a), Some(b)) if b.cycle > a.cycle => Some(SteadyWindow {
                start_cycle: a.cycle,
                end_cycle: b.cycle,
                requested_bytes: b.requested_bytes - a.requested_bytes,
                l2_bytes: b.l2_bytes - a.l2_bytes,
                dram_bytes: b.dram_bytes - a.dram_bytes,
            }),
            _ => None,
        },
        sol,
        sampled: k.sampled.clone(),
        groups: kernel_groups(k),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole > 0 { 100.0 * part as f64 / whole as f64 } else { 0.0 }
}

fn imbalance(t: &GroupTimes) -> Imbalance {
    let total = t.total_cta_cycles();
    let (busiest, bt) = t.busiest().unwrap_or_default();
    let (straggler, st) = t.straggler().unwrap_or_default();
    let n = t.by_group.len() as f64;
    Imbalance {
        busiest,
        busiest_cta_cycles: bt.cta_cycles,
        busiest_share_pct: pct(bt.cta_cycles, total),
        // Max over mean (0 when nothing ran).
        imbalance: if total > 0 { bt.cta_cycles as f64 * n / total as f64 } else { 0.0 },
        straggler,
        straggler_end_cycle: st.last_end,
    }
}

fn kernel_groups(k: &KernelRun) -> Option<KernelGroups> {
    let (g, t) = (k.info.cta_group.as_ref()?, k.groups.as_ref()?);
    let total = t.total_cta_cycles();
    Some(KernelGroups {
        name: g.name.clone(),
        groups: t
            .by_group
            .iter()
            .map(|(&group, x)| GroupReport {
                group,
                ctas: x.ctas,
                cta_cycles: x.cta_cycles,
                share_pct: pct(x.cta_cycles, total),
                first_start_cycle: x.first_start,
                last_end_cycle: x.last_end,
            })
            .collect(),
        summary: imbalance(t),
        untracked_ctas: t.untracked_ctas,
    })
}

/// Per group name, the groups summed over the kernels that have that grouping (in name order).
fn group_summaries(kernels: &[&KernelRun]) -> Vec<GroupSummary> {
    let mut by_name: BTreeMap<&str, (Vec<u32>, GroupTimes)> = BTreeMap::new();
    for k in kernels {
        let (Some(g), Some(t)) = (k.info.cta_group.as_ref(), k.groups.as_ref()) else { continue };
        let (ids, sum) = by_name.entry(g.name.as_str()).or_default();
        ids.push(k.info.id);
        sum.absorb(t);
    }
    by_name
        .into_iter()
        .map(|(name, (kernels, t))| GroupSummary {
            name: name.to_string(),
            kernels,
            groups: t.by_group.len() as u64,
            summary: imbalance(&t),
        })
        .collect()
}

pub(crate) fn build_report(
    arch: &Arch,
    model: &str,
    kernels: &[KernelRun],
    end: u64,
    links: Vec<crate::mem::LinkStats>,
) -> Report {
    let refs: Vec<&KernelRun> = kernels.iter().collect();
    build_report_refs(arch, model, &refs, end, links)
}

pub(crate) fn build_report_refs(
    arch: &Arch,
    model: &str,
    kernels: &[&KernelRun],
    end: u64,
    links: Vec<crate::mem::LinkStats>,
) -> Report {
    let ks: Vec<KernelReport> = kernels.iter().map(|k| kernel_report(arch, k)).collect();
    let first = kernels.iter().filter_map(|k| k.start).min().unwrap_or(0);
    let last = kernels.iter().map(|k| k.end).max().unwrap_or(end);
    let total_cycles = last.saturating_sub(first);
    let time_us = run_time_us(arch, &ks);
    let flops: u64 = ks.iter().map(|k| k.flops).sum();
    Report {
        schema_version: REPORT_SCHEMA_VERSION,
        arch: arch.name.clone(),
        memory_model: model.to_string(),
        launch: arch.sim.launch.clone(),
        sm_clock_mhz: arch.clocks.sm.mhz(),
        total_cycles,
        time_us,
        warp_instructions: ks.iter().map(|k| k.warp_instructions).sum(),
        flops,
        tflops: if time_us > 0.0 { flops as f64 / (time_us * 1e-6) / 1e12 } else { 0.0 },
        streams: streams(arch, &ks),
        critical_path: critical_path(kernels),
        cta_groups: group_summaries(kernels),
        kernels: ks,
        links,
        partial: None,
    }
}

/// The run's time. Cycles outside kernels (launch gaps) run at the configured clock, each
/// kernel's own cycles at its clock. Where kernels overlap, the chip runs at the slowest clock
/// of those running (the power limit is the chip's).
fn run_time_us(arch: &Arch, ks: &[KernelReport]) -> f64 {
    let first = ks.iter().map(|k| k.start_cycle).min().unwrap_or(0);
    let last = ks.iter().map(|k| k.end_cycle).max().unwrap_or(0);
    let total = last.saturating_sub(first);
    let mut by_start: Vec<&KernelReport> = ks.iter().collect();
    by_start.sort_by_key(|k| (k.start_cycle, k.id));
    let overlap = by_start.windows(2).any(|w| w[1].start_cycle < w[0].end_cycle);
    if !overlap {
        let slower: f64 = ks.iter().map(|k| k.time_us - us(k.cycles, arch.clocks.sm)).sum();
        return us(total, arch.clocks.sm) + slower;
    }
    // Elementary intervals between kernel starts and ends.
    let mut points: Vec<u64> = ks.iter().flat_map(|k| [k.start_cycle, k.end_cycle]).collect();
    points.sort_unstable();
    points.dedup();
    let base = arch.clocks.sm.mhz();
    let mut t = 0.0;
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let mhz =
            ks.iter().filter(|k| k.start_cycle <= a && k.end_cycle >= b).map(|k| k.clock_mhz).fold(base, f64::min);
        t += (b - a) as f64 / mhz;
    }
    t
}

fn streams(arch: &Arch, ks: &[KernelReport]) -> Vec<StreamReport> {
    let mut by: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for k in ks {
        by.entry(k.stream).or_default().push((k.start_cycle, k.end_cycle));
    }
    by.into_iter()
        .map(|(stream, mut iv)| {
            iv.sort_unstable();
            let (mut busy, mut cur) = (0u64, None::<(u64, u64)>);
            for (a, b) in iv.iter().copied() {
                cur = match cur {
                    Some((s, e)) if a <= e => Some((s, e.max(b))),
                    Some((s, e)) => {
                        busy += e - s;
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            if let Some((s, e)) = cur {
                busy += e - s;
            }
            StreamReport {
                stream,
                kernels: iv.len() as u32,
                busy_cycles: busy,
                busy_us: us(busy, arch.clocks.sm),
                first_cycle: iv.iter().map(|x| x.0).min().unwrap_or(0),
                last_cycle: iv.iter().map(|x| x.1).max().unwrap_or(0),
            }
        })
        .collect()
}

/// From the last kernel to finish back through the predecessors that held back each launch.
fn critical_path(kernels: &[&KernelRun]) -> Vec<u32> {
    let by_id: BTreeMap<u32, &KernelRun> = kernels.iter().map(|k| (k.info.id, *k)).collect();
    // The last to end; on a tie the later kernel (it started last).
    let Some(mut k) = kernels.iter().copied().max_by_key(|k| (k.end, k.info.id)) else { return Vec::new() };
    let mut path = vec![k.info.id];
    while let Some(p) = k.gated_by.and_then(|id| by_id.get(&id))
        && path.len() <= kernels.len()
    {
        path.push(p.info.id);
        k = p;
    }
    path.reverse();
    path
}
