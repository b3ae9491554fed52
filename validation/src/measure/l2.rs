//! L2-resident read bandwidth: RRZE's gpu-l2-cache shape (validation/cuda/stream.cu `l2_read`),
//! the simulator's `Bench::L2Read`.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::{alloc, drv, fill};
use super::host::{SplitMix64, uniform};
use super::kernels::STREAM;
use super::runner::Run;
use super::timing::time_runs;

/// Bytes one CTA column reads per rep: 1024 threads × 32 float4.
const SLICE: u64 = 1024 * 32 * 16;
const SEED: u32 = 2000;

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    for frac in r.plan.l2_fractions.clone() {
        one(r, frac)?;
    }
    Ok(())
}

fn one(r: &mut Run, frac: f64) -> Result<(), MeasureError> {
    let l2 = r.gpu.info.l2_bytes;
    let block_run = ((frac * l2 as f64 / SLICE as f64).round() as u64).max(1);
    let footprint = block_run * SLICE;
    let reps = (r.plan.l2_total_bytes / footprint).clamp(1, 65535);
    let f = r.gpu.function(&STREAM, "l2_read")?;
    let n = (footprint / 4) as usize;
    let mut x = alloc::<f32>(&r.gpu, n, "the L2 data set")?;
    fill(&mut r.gpu, "fill_f32", &mut x, SEED)?;
    let mut sums = r.gpu.stream.alloc_zeros::<f32>((block_run * 1024) as usize).map_err(drv("allocating the sums"))?;
    let stream = r.gpu.stream.clone();
    let launch = |grid_y: u64, check: u32, sums: &mut cudarc::driver::CudaSlice<f32>| {
        let cfg = LaunchConfig {
            grid_dim: (block_run as u32, grid_y as u32, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: l2_read(const float4* x, float* sums, u32 check) reads block_run * 512 KiB of x and
        // writes at most block_run * 1024 sums.
        unsafe { stream.launch_builder(&f).arg(&x).arg(sums).arg(&check).launch(cfg) }
            .map(|_| ())
            .map_err(drv("launching l2_read"))
    };
    // Check: one pass with the sums written.
    launch(1, 1, &mut sums)?;
    let got = r.gpu.stream.clone_dtoh(&sums).map_err(drv("reading the sums"))?;
    let mut rng = SplitMix64(footprint);
    for _ in 0..64 {
        let (bx, t) = (rng.below(block_run), rng.below(1024));
        let mut sum = 0f32;
        for k in 0..32u64 {
            let i4 = 1024 * block_run * k + 1024 * bx + t;
            let v = |c: u64| uniform(4 * i4 + c, SEED);
            sum += (v(0) + v(1)) + (v(2) + v(3));
        }
        let g = got[(1024 * bx + t) as usize];
        if g.to_bits() != sum.to_bits() {
            return Err(MeasureError::Check {
                what: format!("l2_read over {} KiB", footprint >> 10),
                detail: format!("CTA {bx} thread {t} summed {g}, the host {sum}"),
            });
        }
    }
    // The check pass and the warm-up runs leave the data set in the L2 (the simulator's warm-up
    // kernel); each timed run is one kernel of `reps` passes.
    let t = time_runs(&r.gpu, r.plan.warmups.max(1), r.plan.repetitions, |_| launch(reps, 0, &mut sums))?;
    let median_ms = t.median_ms;
    let bytes = footprint * reps;
    let gbps = bytes as f64 / (median_ms * 1e-3) / 1e9;
    let clock = r.case_clock(t.clocks)?;
    let kib = footprint >> 10;
    let mut c = new_case(format!("bw-l2-{kib}kib"), Kind::Bandwidth, Metric::Gbps, gbps);
    c.clock_mhz = Some(clock);
    c.level = Some("L2".into());
    c.footprint_kb = Some(kib as f64);
    c.implementation = Some(format!(
        "l2_read: grid ({block_run}, {reps}) x 1024 threads, 32 ld.global.cg.v4.f32 (LDG.E.128.STRONG.GPU) per thread"
    ));
    c.source = format!("{} l2_read", STREAM.path);
    c.locator = r.locator(&format!(
        "stream.cu l2_read, data set {kib} kB ({:.2} x the L2) read {reps} times per kernel, after warm-up runs",
        footprint as f64 / l2 as f64
    ));
    c.notes = Some(format!("bandwidth = {bytes} B read / median time of the timed kernel"));
    r.push(c);
    Ok(())
}
