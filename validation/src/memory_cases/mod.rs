//! Every latency and bandwidth case of the reference data as a simulation.
//!
//! [`memory_case_plan`] maps a [`Case`] of kind `latency` or `bandwidth` to a [`Plan`]: either
//! [`Plan::Run`] (which preset, at which clock, which microbenchmark, what tolerance) or
//! [`Plan::NotApplicable`] with the reason (no preset for the part, a figure stated jointly for
//! several GPUs, ...). No case is skipped silently: every latency and bandwidth case gets one
//! of the two. [`run_case`] runs a plan and compares the result with the published value.
//!
//! What each [`Bench`] simulates and how it turns cycles into the case's metric:
//!
//! | bench | trace | result |
//! |---|---|---|
//! | [`Bench::Chase`] | [`pointer_chase_pair`], plain `LDG.E.64` (through the L1), random order | (cycles₂ − cycles₁) / extra loads |
//! | [`Bench::TmaChase`] | the same chain with each step a TMA load: `SYNCS.ARRIVE.TRANS64`, `UTMALDG`, `SYNCS.PHASECHK` wait, `LDS` of the next pointer, `R2UR` | per step, as above |
//! | [`Bench::Dsmem`] | [`dsmem_latency_pair`] | per step |
//! | [`Bench::InstChain`] | a dependent chain of one instruction | per instruction |
//! | [`Bench::Stream`] | [`stream`] twice, the second kernel timed | bytes / time |
//! | [`Bench::L2Read`], [`Bench::L2ReadDram`] | [`l2_read`] (warm-up kernel, timed kernel of a few waves) | bytes / time over the timed kernel's steady window (every CTA slot busy: RRZE's 200 000 CTAs run hundreds of waves) |
//! | [`Bench::L1Read`] | an L1-resident read (every SM rereads the same data set) at two lengths | Δbytes / Δtime |
//! | [`Bench::TmaStream`] | [`async_copy_pipeline`] with TMA, no compute, from DRAM | bytes / time |
//!
//! Pointer chases are sized by [`chase_for_footprint`]: every 128-byte line of the footprint
//! once per pass while that is at most three times the L2's lines; beyond, a sparser chain (a
//! stride of several lines) that still touches about twice the L2's lines per pass, so that it
//! misses in the L2 as the full chain does (the model has no TLB, so the span beyond that
//! changes nothing) while the simulation stays at a few million loads.

use std::time::{Duration, Instant};

use gpusim_configs::{Arch, Hertz, load_preset, validate};
use gpusim_isa::{AddrExpr, Dim3, KernelInfo, MemTraceSource, OpTable, Trace, Var};
use gpusim_sim_core::{Report, simulate};
use gpusim_workloads::ubench::{
    CopyEngine, CopyPipeline, Dsmem, L2Read, PointerChase, Stream, StreamKind, async_copy_pipeline, dsmem_latency_pair,
    l2_read, pointer_chase_pair, stream,
};

use crate::case::{Case, Kind, Metric, Trust};

pub use crate::case::{DEFAULT_DRAM_CHASE_FOOTPRINT, L1_CHASE_FOOTPRINT, L2_CHASE_FOOTPRINT, L2_FAR_CHASE_FOOTPRINT};

/// Stream and l2bench-DRAM traffic per kernel, in multiples of the L2 size.
pub const STREAM_L2_MULTIPLE: u64 = 4;
/// Bytes the timed L2-bandwidth kernel reads (RRZE's data set, read repeatedly).
pub const L2_READ_TOTAL: u64 = 256 << 20;
/// Passes over the data set of [`Bench::L2ReadDram`]'s timed kernel: about 6 waves on A100 and
/// H100. The steady window counts bytes as the loads issue, and a DRAM-bound SM has thousands of
/// cycles of loads queued, so the window must be long against that: with 2 passes the A100
/// case reads 2% higher than with 8, with 4 passes 0.3%.
pub const L2_READ_DRAM_PASSES: u64 = 4;

/// What to simulate for a case. Sizes that depend on the chip (stride of a DRAM chase, array
/// sizes of a stream) are chosen by [`Bench::run`] from the `Arch`.
#[derive(Clone, Debug, PartialEq)]
pub enum Bench {
    /// Dependent-load latency: [`pointer_chase_pair`] sized by [`chase_for_footprint`].
    Chase { footprint_bytes: u64 },
    /// The same chain issued through TMA ([`tma_chase`]).
    TmaChase { footprint_bytes: u64 },
    /// Distributed shared memory latency ([`dsmem_latency_pair`], cluster of 2, generic
    /// `LD.E` through the cluster window): rank 1's shared memory (`remote`) or the CTA's own.
    Dsmem { remote: bool },
    /// Latency of a dependent chain of one instruction (`Rd = op(Rd, ...)`).
    InstChain { mnemonic: &'static str },
    /// STREAM kernel ([`stream`], 2 CTAs of 1024 threads per SM), run twice with the second
    /// kernel timed (the steady state of repeated runs: it pays the write-backs of the first run's
    /// dirty lines as it leaves its own in the L2), each run moving [`STREAM_L2_MULTIPLE`] × the
    /// L2 size. Triad: 3 loads + 1 store, as the cases' notes describe it.
    Stream { kind: StreamKind },
    /// RRZE's L2 bandwidth benchmark ([`l2_read`]) at a data set; the timed kernel runs after the
    /// warm-up kernel and reads [`L2_READ_TOTAL`] bytes, measured over its steady window.
    L2Read { footprint_bytes: u64 },
    /// The same benchmark with a data set far beyond the L2 (DRAM bandwidth): simulated at
    /// `min(footprint, STREAM_L2_MULTIPLE × L2)`, warm-up kernel then [`L2_READ_DRAM_PASSES`]
    /// timed passes, measured over the steady window.
    L2ReadDram { footprint_bytes: u64 },
    /// L1-resident read bandwidth, summed over all SMs ([`l1_read`]).
    L1Read { footprint_bytes: u64 },
    /// TMA streaming from DRAM over all SMs: [`async_copy_pipeline`] with `ctas_per_sm` CTAs per
    /// SM, `tile_bytes` per `UTMALDG`, 3 stages, no compute.
    TmaStream { ctas_per_sm: u32, tile_bytes: u32 },
}

/// How a case is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Run {
        preset: &'static str,
        /// SM clock to simulate at (the case's `clock_mhz`); `None`: the preset's.
        clock_mhz: Option<f64>,
        bench: Bench,
        /// Largest accepted relative error |simulated − published| / published.
        tolerance: f64,
    },
    /// Why no simulation is compared with this case.
    NotApplicable(String),
}

/// Cases that contradict a higher-trust case on the same part, so that no single chip
/// description can match both: (case, the case it contradicts, why). They are simulated and
/// printed like every other case, but only the case they contradict is held to its tolerance.
pub const DISPUTED: &[(&str, &str, &str)] = &[(
    "lat-a100sxm-l1-dewing",
    "lat-a10080-l1-rrze",
    "39 cycles, medium trust, clocks not locked; its source says its L1 figures read a few cycles above \
     RRZE's, and RRZE's 33.0 cycles (high trust, 1410 MHz locked) on the same A100 SM is the one the \
     preset matches within 5%; 39 would be 18% off it",
)];

/// Tolerance of a case: 5% for a high-trust latency, 10% otherwise.
pub fn tolerance_for(case: &Case) -> f64 {
    if case.kind == Kind::Latency && case.trust == Trust::High { 0.05 } else { 0.10 }
}

/// A footprint in a case's locator ("... footprint 189907 kB"), in bytes.
fn locator_footprint(case: &Case) -> Option<u64> {
    let l = &case.locator;
    let at = l.find("footprint ")? + "footprint ".len();
    let rest = &l[at..];
    let num: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let unit = rest[num.len()..].trim_start();
    let kb: f64 = num.parse().ok()?;
    unit.starts_with("kB").then(|| (kb * 1024.0).round() as u64)
}

/// Maps a latency or bandwidth case to its plan. Cases of other kinds are not applicable here.
pub fn memory_case_plan(case: &Case) -> Plan {
    let na = |s: String| Plan::NotApplicable(s);
    if !matches!(case.kind, Kind::Latency | Kind::Bandwidth) {
        return na(format!("kind `{}` is not a latency or bandwidth case", case.kind));
    }
    if case.metric == Metric::BytesPerClkPerSm {
        return na(format!(
            "`{}` bytes/clk/SM is stated jointly for {} and approximately (\"close to\"); the A100 80GB \
             measurement of the same L1 bandwidth (bw-a10080-l1-rrze) is simulated instead",
            case.value, case.hardware
        ));
    }
    let Some(preset) = gpusim_configs::preset_for_hardware(&case.hardware) else {
        return na(format!(
            "no preset models the {} (presets: A100 SXM4/PCIe, H100 SXM5/PCIe, H800 SXM5/PCIe, H200 SXM)",
            case.hardware
        ));
    };
    let level = case.level.as_deref().unwrap_or("");
    let bench = match (&case.kind, &case.metric) {
        (Kind::Latency, Metric::Cycles) => match level {
            "L1" => Bench::Chase { footprint_bytes: L1_CHASE_FOOTPRINT },
            "L2" => Bench::Chase { footprint_bytes: L2_CHASE_FOOTPRINT },
            "L2-far" => Bench::Chase { footprint_bytes: L2_FAR_CHASE_FOOTPRINT },
            "DRAM" => Bench::Chase { footprint_bytes: locator_footprint(case).unwrap_or(DEFAULT_DRAM_CHASE_FOOTPRINT) },
            "TMA load, L2-resident" => Bench::TmaChase { footprint_bytes: L2_CHASE_FOOTPRINT },
            "TMA load, DRAM" => {
                Bench::TmaChase { footprint_bytes: locator_footprint(case).unwrap_or(DEFAULT_DRAM_CHASE_FOOTPRINT) }
            }
            l if l.starts_with("DSM") => Bench::Dsmem { remote: true },
            l if l.starts_with("shared (via cluster addressing") => Bench::Dsmem { remote: false },
            l if l.starts_with("instruction (DPX viaddmax") => Bench::InstChain { mnemonic: "VIADDMNMX" },
            _ => return na(format!("no microbenchmark for latency level `{level}`")),
        },
        (Kind::Bandwidth, Metric::Gbps) => match (level, case.kernel.as_deref(), case.footprint_bytes()) {
            ("DRAM", Some("read"), _) => Bench::Stream { kind: StreamKind::Read },
            ("DRAM", Some("triad"), _) => Bench::Stream { kind: StreamKind::Triad },
            ("DRAM", Some("init"), _) => Bench::Stream { kind: StreamKind::Write },
            ("DRAM", None, Some(f)) => Bench::L2ReadDram { footprint_bytes: f },
            ("DRAM", None, None) if case.source.contains("copy") => Bench::Stream { kind: StreamKind::Copy },
            ("L2", None, Some(f)) => Bench::L2Read { footprint_bytes: f },
            ("L1", None, Some(f)) => Bench::L1Read { footprint_bytes: f },
            ("DRAM via TMA", None, None) => Bench::TmaStream { ctas_per_sm: 4, tile_bytes: 16 << 10 },
            _ => {
                return na(format!(
                    "no microbenchmark for bandwidth level `{level}` with kernel {:?} and footprint {:?}",
                    case.kernel, case.footprint_kb
                ));
            }
        },
        (k, m) => return na(format!("no microbenchmark gives metric `{m}` for kind `{k}`")),
    };
    Plan::Run { preset, clock_mhz: case.clock_mhz, bench, tolerance: tolerance_for(case) }
}

/// Loads `preset`, at `clock_mhz` when given (the SM clock only, then validated).
pub fn arch_for(preset: &str, clock_mhz: Option<f64>) -> Result<Arch, String> {
    lock_clock(load_preset(preset).map_err(|e| e.to_string())?, clock_mhz)
}

/// `arch` with its SM clock locked at `clock_mhz` (a case's stated clock), or as it is for `None`.
pub fn lock_clock(mut arch: Arch, clock_mhz: Option<f64>) -> Result<Arch, String> {
    if let Some(mhz) = clock_mhz {
        if !(mhz.is_finite() && mhz > 0.0) {
            return Err(format!("clock_mhz = {mhz} is not a clock"));
        }
        arch.clocks.lock_sm(Hertz((mhz * 1e6).round() as u64));
        validate(&arch).map_err(|e| format!("{} at {mhz} MHz: {e}", arch.name))?;
    }
    Ok(arch)
}

/// The result of a bench on one chip.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// In the case's metric: cycles for latencies, GB/s (1e9 B/s) for bandwidths.
    pub value: f64,
    pub metric: Metric,
    /// Simulated warp instructions, all runs together.
    pub warp_instructions: u64,
    /// Dynamic loads of a chase (all runs together); 0 for other benches.
    pub chase_loads: u64,
    /// Wall time of trace generation and simulation.
    pub wall: Duration,
    /// What exactly was simulated.
    pub detail: String,
}

fn sim(arch: &Arch, trace: &Trace) -> Result<Report, String> {
    let mut src = MemTraceSource::new(trace.clone());
    simulate(arch, &mut src, &crate::sim_options::options()).map_err(|e| e.to_string())
}

fn kernel_cycles(arch: &Arch, trace: &Trace, kernel: usize) -> Result<(u64, u64), String> {
    let r = sim(arch, trace)?;
    let k = r.kernels.get(kernel).ok_or_else(|| format!("kernel {kernel} did not run"))?;
    Ok((k.cycles, r.warp_instructions))
}

/// Bandwidth of `kernel` over its steady window (every CTA slot busy), with the run's warp
/// instructions. RRZE's `gpu-l2-cache` launches 200 000 CTAs, hundreds of waves, so what it
/// times is this steady rate; the few waves simulated here would add a partial last wave's tail.
fn steady_gbps(arch: &Arch, trace: &Trace, kernel: usize) -> Result<(f64, u64), String> {
    let r = sim(arch, trace)?;
    let k = r.kernels.get(kernel).ok_or_else(|| format!("kernel {kernel} did not run"))?;
    let w = k.steady.as_ref().ok_or_else(|| {
        format!(
            "kernel {kernel} ({} CTAs, {:.2} waves) has no steady window: its grid must hold more than one wave",
            k.ctas, k.occupancy.waves
        )
    })?;
    Ok((gbps(w.requested_bytes, w.cycles(), arch), r.warp_instructions))
}

fn gbps(bytes: u64, cycles: u64, arch: &Arch) -> f64 {
    bytes as f64 / (cycles.max(1) as f64 / arch.clocks.sm.0 as f64) / 1e9
}

fn mib(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// A pointer chase over `footprint_bytes` on `arch`, sized for simulation:
/// - one element per 128-byte line, in random order, while the footprint holds at most three
///   times the L2's lines (the L1 and L2 plateaus, the far-L2 step, the L2-to-DRAM transition);
/// - beyond, elements `stride` bytes apart (a multiple of 128, chosen so that a pass touches
///   about twice the L2's lines, between 1.5 and 2.5 times): each load still misses in the L2,
///   since the chain cycles through more lines than the L2 holds, spread evenly over its sets;
///   the address span is the footprint's; and a pass stays under a million loads whatever the
///   footprint. (The model has no TLB, so beyond the L2 the span itself changes nothing.)
/// - chains of more than 65536 elements cover the footprint by windows (`cover_footprint`),
///   with the window size chosen so that whole windows cover it.
///
/// The pair of traces simulates 5 passes (warm-up + 1 and warm-up + 2).
pub fn chase_for_footprint(arch: &Arch, footprint_bytes: u64) -> PointerChase {
    let line = 128u64;
    let l2_lines = (arch.l2.size.0 / line).max(1);
    let lines = (footprint_bytes / line).max(1);
    let stride = if lines <= 3 * l2_lines {
        line
    } else {
        // k = round(lines / (2 · l2_lines)) ≥ 2 here.
        let k = (lines + l2_lines) / (2 * l2_lines);
        k.max(1) * line
    };
    let elements = (footprint_bytes / stride).max(1);
    let windows = elements.div_ceil(65536);
    let max_steps = elements / windows;
    PointerChase {
        footprint_bytes: windows * max_steps * stride,
        stride_bytes: stride,
        random: true,
        passes: 1,
        max_steps,
        cover_footprint: windows > 1,
        ..PointerChase::default()
    }
}

/// Latency of one dependent load (cycles) of the chase `p` on `arch`, by the pair method, and
/// the dynamic loads simulated.
fn chase_latency(arch: &Arch, p: &PointerChase) -> Result<(f64, u64, u64), String> {
    let (a, b, extra) = pointer_chase_pair(p)?;
    let (c1, i1) = kernel_cycles(arch, &a.trace, 0)?;
    let (c2, i2) = kernel_cycles(arch, &b.trace, 0)?;
    if c2 <= c1 {
        return Err(format!("the longer chase took {c2} cycles, the shorter {c1}"));
    }
    let loads = p.accesses_per_pass() * (2 * p.passes as u64 + 3);
    Ok(((c2 - c1) as f64 / extra as f64, loads, i1 + i2))
}

/// Simulated pointer-chase latency (cycles per dependent load) at each footprint, with chains
/// sized by [`chase_for_footprint`]. Returns `(footprint actually covered, cycles)`.
///
/// # Panics
/// When a simulation fails (the generators' traces are valid on every preset).
pub fn latency_sweep(arch: &Arch, footprints: &[u64]) -> Vec<(u64, f64)> {
    footprints
        .iter()
        .map(|&f| {
            let p = chase_for_footprint(arch, f);
            let (lat, _, _) = chase_latency(arch, &p).unwrap_or_else(|e| panic!("chase at {f} B: {e}"));
            (p.footprint_bytes, lat)
        })
        .collect()
}

mod traces;

use traces::{L1_READ_THREADS, TMA_BOX, twice};
pub use traces::{inst_chain, l1_read, tma_chase};

impl Bench {
    /// Simulates the bench on `arch` and returns the result in the case's metric.
    pub fn run(&self, arch: &Arch) -> Result<Measurement, String> {
        let t0 = Instant::now();
        // The benchmarks behind the cases time in-kernel (latency) or move data sets far larger
        // than the ones simulated here (bandwidth), so a kernel's fixed launch time is amortised
        // away in what they report: leave it out rather than let a smaller footprint inflate it.
        let mut steady = arch.clone();
        steady.sim.kernel_launch_latency = gpusim_configs::Picos(0);
        let arch = &steady;
        let l2 = arch.l2.size.0;
        let (value, metric, insts, loads, detail) = match *self {
            Bench::Chase { footprint_bytes } => {
                let p = chase_for_footprint(arch, footprint_bytes);
                let (lat, loads, insts) = chase_latency(arch, &p)?;
                let d = format!(
                    "pointer_chase_pair over {} ({} elements {} B apart{}), LDG.E.64",
                    mib(p.footprint_bytes),
                    p.elements(),
                    p.stride_bytes,
                    if p.windows() > 1 { format!(", {} windows", p.windows()) } else { String::new() }
                );
                (lat, Metric::Cycles, insts, loads, d)
            }
            Bench::TmaChase { footprint_bytes } => {
                let p = chase_for_footprint(arch, footprint_bytes);
                let q = PointerChase { passes: p.passes + 1, ..p.clone() };
                let (c1, i1) = kernel_cycles(arch, &tma_chase(&p, arch)?, 0)?;
                let (c2, i2) = kernel_cycles(arch, &tma_chase(&q, arch)?, 0)?;
                if c2 <= c1 {
                    return Err(format!("the longer TMA chase took {c2} cycles, the shorter {c1}"));
                }
                let loads = p.accesses_per_pass() * 5;
                let d = format!(
                    "TMA chase (UTMALDG {TMA_BOX} B + mbarrier wait + LDS + R2UR per step) over {} ({} elements {} B apart)",
                    mib(p.footprint_bytes),
                    p.elements(),
                    p.stride_bytes
                );
                ((c2 - c1) as f64 / p.accesses_per_pass() as f64, Metric::Cycles, i1 + i2, loads, d)
            }
            Bench::Dsmem { remote } => {
                if arch.sm.max_cluster_size < 2 {
                    return Err(format!("{} has no thread-block clusters", arch.name));
                }
                let p = Dsmem { cluster_size: 2, remote, steps: 2048, generic: true };
                let (a, b, extra) = dsmem_latency_pair(&p)?;
                let (c1, i1) = kernel_cycles(arch, &a.trace, 0)?;
                let (c2, i2) = kernel_cycles(arch, &b.trace, 0)?;
                let d = format!(
                    "dsmem_latency_pair, cluster of 2, LD.E + IMAD.IADD + 2 MOV per step, {} shared memory",
                    if remote { "rank 1's" } else { "own" }
                );
                (c2.saturating_sub(c1) as f64 / extra as f64, Metric::Cycles, i1 + i2, 0, d)
            }
            Bench::InstChain { mnemonic } => {
                let n = 1024;
                let (c1, i1) = kernel_cycles(arch, &inst_chain(mnemonic, n, arch)?, 0)?;
                let (c2, i2) = kernel_cycles(arch, &inst_chain(mnemonic, 2 * n, arch)?, 0)?;
                let d = format!("dependent chain of {mnemonic} R2 <- R2 R3 R4, {n} vs {} steps", 2 * n);
                (c2.saturating_sub(c1) as f64 / n as f64, Metric::Cycles, i1 + i2, 0, d)
            }
            Bench::Stream { kind } => {
                let arrays: u64 = match kind {
                    StreamKind::Read | StreamKind::Write => 1,
                    StreamKind::Copy => 2,
                    StreamKind::Triad => 4,
                };
                let per_array = (STREAM_L2_MULTIPLE * l2 / arrays).div_ceil(1 << 20) << 20;
                let p = Stream { kind, bytes_per_array: per_array, ..Stream::default() };
                p.validate(arch)?;
                let u = stream(&p, arch)?;
                let bytes = match u.measure {
                    gpusim_workloads::ubench::Measure::Bandwidth { bytes } => bytes,
                    m => return Err(format!("stream measures {m:?}")),
                };
                let (c, i) = kernel_cycles(arch, &twice(&u.trace), 1)?;
                let d = format!(
                    "STREAM {} ({} array(s) of {}), 2 CTAs × 1024 threads per SM, LDG/STG.E.128; second of two runs timed",
                    kind.name(),
                    arrays,
                    mib(per_array)
                );
                (gbps(bytes, c, arch), Metric::Gbps, i, 0, d)
            }
            Bench::L2Read { footprint_bytes } => {
                let p = L2Read { footprint_bytes, total_bytes_read: L2_READ_TOTAL, ..L2Read::default() };
                p.validate()?;
                let u = l2_read(&p, arch)?;
                let (bw, i) = steady_gbps(arch, &u.trace, u.timed_kernel)?;
                let d = format!(
                    "l2_read, data set {} read {} times after a warm-up kernel, LDG.E.128.STRONG.GPU; \
                     bytes over the timed kernel's steady window",
                    mib(p.effective_footprint()),
                    p.reps()
                );
                (bw, Metric::Gbps, i, 0, d)
            }
            Bench::L2ReadDram { footprint_bytes } => {
                let f = footprint_bytes.min(STREAM_L2_MULTIPLE * l2);
                let p = L2Read { footprint_bytes: f, total_bytes_read: L2_READ_DRAM_PASSES * f, ..L2Read::default() };
                p.validate()?;
                let u = l2_read(&p, arch)?;
                let (bw, i) = steady_gbps(arch, &u.trace, u.timed_kernel)?;
                let d = format!(
                    "l2_read at {} (the case's {} capped at {}× the L2: both stream from DRAM), warm-up + {} timed passes; \
                     bytes over the timed kernel's steady window",
                    mib(p.effective_footprint()),
                    mib(footprint_bytes),
                    STREAM_L2_MULTIPLE,
                    p.reps()
                );
                (bw, Metric::Gbps, i, 0, d)
            }
            Bench::L1Read { footprint_bytes } => {
                let (n, ctas) = (8, 8);
                let (t1, b1) = l1_read(footprint_bytes, n, ctas, arch);
                let (t2, b2) = l1_read(footprint_bytes, 2 * n, ctas, arch);
                let (c1, i1) = kernel_cycles(arch, &t1, 0)?;
                let (c2, i2) = kernel_cycles(arch, &t2, 0)?;
                let d = format!(
                    "l1_read: {ctas} CTAs × {L1_READ_THREADS} threads per SM reread {} with LDG.E.128, {n} vs {} passes",
                    mib(footprint_bytes / 4096 * 4096),
                    2 * n
                );
                (gbps(b2 - b1, c2.saturating_sub(c1), arch), Metric::Gbps, i1 + i2, 0, d)
            }
            Bench::TmaStream { ctas_per_sm, tile_bytes } => {
                let ctas = ctas_per_sm * arch.sm.count;
                let tiles = (STREAM_L2_MULTIPLE * l2).div_ceil(ctas as u64 * tile_bytes as u64) as u32;
                let p = CopyPipeline {
                    engine: CopyEngine::Tma,
                    stages: 3,
                    tiles,
                    tile_bytes,
                    compute_per_tile: 0,
                    ctas: Some(ctas),
                    threads_per_cta: 128,
                    ..CopyPipeline::default()
                };
                p.validate(arch)?;
                let u = async_copy_pipeline(&p, arch)?;
                let (c, i) = kernel_cycles(arch, &u.trace, 0)?;
                let bytes = ctas as u64 * tiles as u64 * tile_bytes as u64;
                let d = format!(
                    "TMA pipeline, {ctas} CTAs × 128 threads, {tiles} tiles of {} each, 3 stages, no compute",
                    mib(tile_bytes as u64)
                );
                (gbps(bytes, c, arch), Metric::Gbps, i, 0, d)
            }
        };
        Ok(Measurement { value, metric, warp_instructions: insts, chase_loads: loads, wall: t0.elapsed(), detail })
    }
}

/// One case run against its plan.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub id: String,
    pub preset: &'static str,
    /// SM clock simulated at, MHz.
    pub clock_mhz: f64,
    pub metric: Metric,
    pub published: f64,
    /// `Err` when the simulation failed.
    pub simulated: Result<f64, String>,
    /// (simulated − published) / published.
    pub error: Option<f64>,
    pub tolerance: f64,
    pub pass: bool,
    pub wall: Duration,
    pub detail: String,
}

/// Runs the plan of `case`; `None` when it is not applicable.
pub fn run_case(case: &Case) -> Option<CaseResult> {
    let Plan::Run { preset, clock_mhz, bench, tolerance } = memory_case_plan(case) else {
        return None;
    };
    let t0 = Instant::now();
    let r = arch_for(preset, clock_mhz).and_then(|arch| {
        // A generator or simulator panic becomes this case's error, so that a table of all the
        // other cases still comes out.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bench.run(&arch)))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("panicked: {msg}"))
            })
            .map(|m| (arch, m))
    });
    let (clock, simulated, detail) = match r {
        Ok((arch, m)) => (arch.clocks.sm.0 as f64 / 1e6, Ok(m.value), m.detail),
        Err(e) => (clock_mhz.unwrap_or(f64::NAN), Err(e), format!("{bench:?}")),
    };
    let error = simulated.as_ref().ok().map(|s| (s - case.value) / case.value);
    Some(CaseResult {
        id: case.id.clone(),
        preset,
        clock_mhz: clock,
        metric: case.metric.clone(),
        published: case.value,
        simulated,
        error,
        tolerance,
        pass: error.is_some_and(|e| e.abs() <= tolerance),
        wall: t0.elapsed(),
        detail,
    })
}

/// The latency and bandwidth cases of `cases` with their plans, in order.
pub fn memory_plans(cases: &[Case]) -> Vec<(&Case, Plan)> {
    cases
        .iter()
        .filter(|c| matches!(c.kind, Kind::Latency | Kind::Bandwidth))
        .map(|c| (c, memory_case_plan(c)))
        .collect()
}

/// Runs every applicable case of `cases` on `threads` threads; results in the order of `cases`.
pub fn run_cases(cases: &[&Case], threads: usize) -> Vec<CaseResult> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<CaseResult>>> = cases.iter().map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= cases.len() {
                        break;
                    }
                    let r = run_case(cases[i]);
                    *slots[i].lock().unwrap() = r;
                }
            });
        }
    });
    slots.into_iter().filter_map(|m| m.into_inner().unwrap()).collect()
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// A Markdown table of results: id, preset, clock, published, simulated, error, tolerance,
/// pass/fail, wall time.
pub fn results_table(results: &[CaseResult]) -> String {
    let mut s = String::from(
        "| case | preset | clock MHz | metric | published | simulated | error | tolerance | result | wall s |\n\
         |---|---|---:|---|---:|---:|---:|---:|---|---:|\n",
    );
    for r in results {
        let (sim, err) = match (&r.simulated, r.error) {
            (Ok(v), Some(e)) => (num(*v), format!("{:+.1}%", 100.0 * e)),
            (Err(e), _) => (format!("error: {e}"), "–".into()),
            (Ok(v), None) => (num(*v), "–".into()),
        };
        s += &format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | ±{:.0}% | {} | {:.1} |\n",
            r.id,
            r.preset,
            r.clock_mhz,
            r.metric,
            num(r.published),
            sim,
            err,
            100.0 * r.tolerance,
            if r.pass { "pass" } else { "FAIL" },
            r.wall.as_secs_f64()
        );
    }
    s
}

/// A Markdown table of the cases that are not applicable and why.
pub fn not_applicable_table(plans: &[(&Case, Plan)]) -> String {
    let mut s = String::from("| case | hardware | level | reason |\n|---|---|---|---|\n");
    for (c, p) in plans {
        if let Plan::NotApplicable(why) = p {
            s += &format!("| {} | {} | {} | {} |\n", c.id, c.hardware, c.level.as_deref().unwrap_or("–"), why);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::load_default;

    #[test]
    fn every_memory_case_gets_a_plan_with_a_reason_when_not_run() {
        let cases = load_default().unwrap();
        let plans = memory_plans(&cases);
        assert_eq!(plans.len(), cases.iter().filter(|c| matches!(c.kind, Kind::Latency | Kind::Bandwidth)).count());
        for (c, p) in &plans {
            match p {
                Plan::NotApplicable(why) => assert!(why.len() > 20, "{}: {why}", c.id),
                Plan::Run { preset, tolerance, .. } => {
                    load_preset(preset).unwrap();
                    assert!(*tolerance == 0.05 || *tolerance == 0.10);
                }
            }
        }
        let plan = |id: &str| plans.iter().find(|(c, _)| c.id == id).map(|(_, p)| p.clone()).unwrap();
        assert!(matches!(plan("lat-v100-l1-dewing"), Plan::NotApplicable(_)));
        assert!(matches!(plan("lat-titanrtx-dfma-arafa"), Plan::NotApplicable(_)));
        assert!(matches!(plan("bw-l1-bytes-per-clk-per-sm-rrze"), Plan::NotApplicable(_)));
        assert_eq!(
            plan("lat-h800pcie-dram-hpmll"),
            Plan::Run {
                preset: "h800-pcie",
                clock_mhz: Some(1755.0),
                bench: Bench::Chase { footprint_bytes: 189907 << 10 },
                tolerance: 0.05
            }
        );
        assert!(matches!(plan("lat-a10080-l2far-rrze"), Plan::Run { tolerance: 0.10, .. }));
        assert!(matches!(plan("bw-h200-d2d-copy"), Plan::Run { bench: Bench::Stream { kind: StreamKind::Copy }, .. }));
    }

    #[test]
    fn chases_are_sized_to_leave_the_l2() {
        let a100 = load_preset("a100-sxm4-80gb").unwrap();
        let l2_lines = a100.l2.size.0 / 128;
        let small = chase_for_footprint(&a100, 32 << 10);
        assert_eq!((small.stride_bytes, small.elements(), small.windows()), (128, 256, 1));
        let far = chase_for_footprint(&a100, 28 << 20);
        assert_eq!((far.stride_bytes, far.accesses_per_pass(), far.footprint_bytes), (128, 229376, 28 << 20));
        for f in [256u64 << 20, 1305397 << 10, 2 << 30] {
            let p = chase_for_footprint(&a100, f);
            let per_pass = p.accesses_per_pass() as f64 / l2_lines as f64;
            assert!((1.5..=3.0).contains(&per_pass), "{f}: {per_pass} × the L2's lines per pass, {p:?}");
            assert!(p.footprint_bytes <= f && p.footprint_bytes as f64 >= 0.95 * f as f64, "{f}: {p:?}");
            assert!(p.stride_bytes.is_multiple_of(128));
        }
    }

    #[test]
    fn locator_footprints_are_read() {
        let cases = load_default().unwrap();
        let c = cases.iter().find(|c| c.id == "lat-a10080-dram-rrze").unwrap();
        assert_eq!(locator_footprint(c), Some((1305397.9f64 * 1024.0).round() as u64));
        let c = cases.iter().find(|c| c.id == "lat-a100sxm-dram-dewing").unwrap();
        assert_eq!(locator_footprint(c), None);
    }
}
