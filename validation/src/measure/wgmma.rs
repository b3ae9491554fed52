//! wgmma throughput on sm_90a (validation/cuda/wgmma.cu).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::drv;
use super::host::median;
use super::kernels::WGMMA;
use super::runner::{Run, clock64_method};

const THREADS: u32 = 256;
const SMEM: u32 = 48 << 10;
/// FLOP of one wgmma.m64n256k16.
const FLOPS: f64 = 2.0 * 64.0 * 256.0 * 16.0;
const RUNS: u32 = 3;

/// Each thread's output, each CTA's cycles, NVML's clocks while the kernel ran.
type Launched = (Vec<f32>, Vec<u64>, Option<(f64, f64)>);

fn launch(r: &mut Run, iters: u32, ones: bool) -> Result<Launched, MeasureError> {
    let f = r.gpu.function(&WGMMA, "wgmma_tput_bf16")?;
    let ctas = r.gpu.info.sms;
    let s = &r.gpu.stream;
    let mut out = s.alloc_zeros::<f32>((ctas * THREADS) as usize).map_err(drv("allocating the outputs"))?;
    let mut cycles = s.alloc_zeros::<u64>(ctas as usize).map_err(drv("allocating the cycle counts"))?;
    let ones = ones as u32;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: SMEM };
    // SAFETY: wgmma_tput_bf16(float* out, u32 iters, u32 ones, u64* cycles) with 48 KiB of dynamic
    // shared memory writes one float per thread and one count per CTA.
    unsafe { s.launch_builder(&f).arg(&mut out).arg(&iters).arg(&ones).arg(&mut cycles).launch(cfg) }
        .map_err(drv("launching wgmma_tput_bf16"))?;
    let during = r.gpu.nvml_clocks();
    let out_h = s.clone_dtoh(&out).map_err(drv("reading the outputs"))?;
    let cyc_h = s.clone_dtoh(&cycles).map_err(drv("reading the cycle counts"))?;
    Ok((out_h, cyc_h, during))
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    if !WGMMA.runs_on(r.gpu.info.cc) {
        return Err(MeasureError::Unsupported(format!(
            "wgmma needs sm_90a (compute capability 9.0); this device is {}.{}",
            r.gpu.info.cc.0, r.gpu.info.cc.1
        )));
    }
    // All ones: 4 MMAs of K = 16 per iteration into each of 128 accumulators.
    let (out, _, _) = launch(r, 8, true)?;
    let want = 128.0 * 8.0 * 4.0 * 16.0;
    if let Some(i) = out.iter().position(|&x| x as f64 != want) {
        return Err(MeasureError::Check {
            what: "wgmma_tput_bf16 with all-ones operands".into(),
            detail: format!("thread {i} holds {}, expected {want}", out[i]),
        });
    }
    let iters = (r.plan.mma_iters / 4).max(1);
    launch(r, iters, false)?; // warm-up
    let flops_per_cta = 2.0 * iters as f64 * 4.0 * FLOPS;
    let (mut rates, mut during) = (Vec::new(), None);
    for _ in 0..RUNS {
        let (_, cycles, clocks) = launch(r, iters, false)?;
        let per_cta: Vec<f64> = cycles.iter().filter(|&&c| c > 0).map(|&c| flops_per_cta / c as f64).collect();
        rates.push(median(&per_cta));
        during = during.or(clocks);
    }
    let clock = r.case_clock(during)?;
    let rate = median(&rates);
    let sms = r.gpu.info.sms;
    let mut c = new_case("peak-wgmma-bf16", Kind::Peak, Metric::FlopsPerClkPerSm, rate);
    c.clock_mhz = Some(clock);
    c.dtype = Some("bf16".into());
    c.implementation = Some(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 (HGMMA.64x256x16.F32.BF16), operands in shared memory, \
         2 warpgroups per CTA"
            .into(),
    );
    c.source = format!("{} wgmma_tput_bf16", WGMMA.path);
    c.locator = r.locator(&format!(
        "wgmma.cu wgmma_tput_bf16, {sms} CTAs (one per SM) x 256 threads, {iters} iterations of 4 wgmma"
    ));
    c.method = Some(clock64_method(
        RUNS,
        "cycles between two __syncthreads around the loop, per CTA; the median CTA",
        "all-ones operands give every accumulator 64 x iters",
    ));
    c.notes = Some(format!("{:.1} TFLOP/s at {clock:.0} MHz over {sms} SMs", rate * clock * 1e6 * sms as f64 / 1e12));
    r.push(c);
    Ok(())
}
