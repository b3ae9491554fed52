//! Pointer-chase latency over the suite's footprints (validation/cuda/chase.cu).

use cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::{alloc, drv};
use super::host::{cyclic_permutation, median, walk};
use super::kernels::CHASE;
use super::runner::{Run, clock64_method};
use super::suite::chase_level;

/// Bytes between chain elements: one element per 128-byte line, as the simulator's chase.
const STRIDE: u64 = 128;

fn label(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{}gib", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}mib", bytes >> 20)
    } else {
        format!("{}kib", bytes >> 10)
    }
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    let mut jobs: Vec<(u64, &'static str)> = r.plan.chase_footprints.iter().map(|&f| (f, "chase_ca")).collect();
    jobs.extend(r.plan.chase_cg_footprints.iter().map(|&f| (f, "chase_cg")));
    for (footprint, kernel) in jobs {
        if footprint > r.gpu.info.memory_bytes / 4 {
            let line = format!("  footprint {} skipped: over a quarter of the device memory", label(footprint));
            r.say(&line);
            continue;
        }
        one(r, footprint, kernel)?;
    }
    Ok(())
}

fn one(r: &mut Run, footprint: u64, kernel: &'static str) -> Result<(), MeasureError> {
    let elements = (footprint / STRIDE).max(1);
    if elements > u32::MAX as u64 {
        return Err(MeasureError::Unsupported(format!("footprint {footprint} B: too many elements")));
    }
    let init = r.gpu.function(&CHASE, "chase_init")?;
    let f = r.gpu.function(&CHASE, kernel)?;
    let next = cyclic_permutation(elements as usize, 0x5eed ^ footprint);
    let next_dev = r.gpu.stream.clone_htod(&next).map_err(drv("copying the chase permutation"))?;
    let buf = alloc::<u8>(&r.gpu, (elements * STRIDE) as usize, "the chase buffer")?;
    let (base, _sync) = buf.device_ptr(&r.gpu.stream);
    let cfg = LaunchConfig { grid_dim: (4 * r.gpu.info.sms, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: chase_init(u64 base, const u32* next, u64 elements, u64 stride) writes one pointer per
    // element inside the buffer of elements * stride bytes at `base`.
    unsafe { r.gpu.stream.launch_builder(&init).arg(&base).arg(&next_dev).arg(&elements).arg(&STRIDE).launch(cfg) }
        .map_err(drv("launching chase_init"))?;

    let (full_cycle_max, chase_steps, runs) =
        (r.plan.chase_full_cycle_max as u64, r.plan.chase_steps as u64, r.plan.chase_repetitions.max(1));
    // Walk the whole cycle first while it is short (the L1 and L2 footprints), else as many
    // steps as are timed; time at least `chase_steps`, and the whole cycle while it is short.
    let warm = elements.min(full_cycle_max) as u32;
    let timed = elements.min(full_cycle_max).max(chase_steps).div_ceil(16) * 16;
    let blocks16 = (timed / 16) as u32;
    let expected = base + walk(&next, 0, warm as u64 + timed) as u64 * STRIDE;
    let mut out = r.gpu.stream.alloc_zeros::<u64>(2).map_err(drv("allocating the chase result"))?;
    let one_thread = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
    let (mut lat, mut during) = (Vec::new(), None);
    for _ in 0..runs {
        // SAFETY: chase_*(u64 start, u32 warm, u32 blocks16, u64* out) follows pointers inside the
        // buffer chase_init wrote and writes 2 words to `out`.
        unsafe {
            r.gpu.stream.launch_builder(&f).arg(&base).arg(&warm).arg(&blocks16).arg(&mut out).launch(one_thread)
        }
        .map_err(drv(format!("launching {kernel}")))?;
        // The kernel runs now: the clocks under its load.
        during = during.or(r.gpu.nvml_clocks());
        let v = r.gpu.stream.clone_dtoh(&out).map_err(drv("reading the chase result"))?;
        if v[1] != expected {
            return Err(MeasureError::Check {
                what: format!("{kernel} over {}", label(footprint)),
                detail: format!("the walk ended at {:#x}, the permutation says {expected:#x}", v[1]),
            });
        }
        lat.push(v[0] as f64 / timed as f64);
    }
    drop(_sync);
    let clock = r.case_clock(during)?;
    let level = chase_level(footprint, r.gpu.info.l2_bytes);
    let cg = kernel == "chase_cg";
    let id = format!("lat-{}{}", label(footprint), if cg { "-cg" } else { "" });
    let mut c = new_case(id, Kind::Latency, Metric::Cycles, median(&lat));
    c.clock_mhz = Some(clock);
    c.level = Some(level);
    c.footprint_kb = Some((elements * STRIDE) as f64 / 1024.0);
    c.implementation = Some(format!(
        "{kernel}: one thread, dependent {} loads",
        if cg { "ld.global.cg (LDG.E.64.STRONG.GPU, L1 bypassed)" } else { "ld.global (LDG.E.64, through the L1)" }
    ));
    c.source = format!("{} {kernel}", CHASE.path);
    c.locator = r.locator(&format!(
        "chase.cu {kernel}, footprint {} kB, {} elements 128 B apart in one random cycle, {timed} timed loads after {warm}",
        elements * STRIDE / 1024,
        elements
    ));
    c.method = Some(clock64_method(
        runs,
        "cycles of the timed walk / its loads",
        "the walk's end point equals the permutation's",
    ));
    c.notes = Some(format!("runs: {}", lat.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(", ")));
    r.push(c);
    Ok(())
}
