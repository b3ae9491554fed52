//! wgmma throughput on sm_90a, and whether MUFU.EX2 overlaps a wgmma chain
//! (validation/cuda/wgmma.cu).

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

/// Per CTA: the wgmma loop's cycles, the ex2 loop's, the whole's; NVML's clocks meanwhile.
type Overlap = (Vec<[u64; 3]>, Option<(f64, f64)>);

fn launch_overlap(r: &mut Run, iters: u32, ex2_iters: u32, mode: u32) -> Result<Overlap, MeasureError> {
    let f = r.gpu.function(&WGMMA, "wgmma_mufu_overlap")?;
    let ctas = r.gpu.info.sms;
    let s = &r.gpu.stream;
    let mut out = s.alloc_zeros::<f32>((ctas * 384) as usize).map_err(drv("allocating the outputs"))?;
    let mut cycles = s.alloc_zeros::<u64>(3 * ctas as usize).map_err(drv("allocating the cycle counts"))?;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (384, 1, 1), shared_mem_bytes: SMEM };
    // SAFETY: wgmma_mufu_overlap(float* out, u32 iters, u32 ex2_iters, u32 mode, u64* cycles)
    // with 48 KiB of dynamic shared memory writes one float per thread and three counts per CTA.
    unsafe { s.launch_builder(&f).arg(&mut out).arg(&iters).arg(&ex2_iters).arg(&mode).arg(&mut cycles).launch(cfg) }
        .map_err(drv("launching wgmma_mufu_overlap"))?;
    let during = r.gpu.nvml_clocks();
    let cyc = s.clone_dtoh(&cycles).map_err(drv("reading the cycle counts"))?;
    Ok((cyc.chunks(3).map(|c| [c[0], c[1], c[2]]).collect(), during))
}

/// The median over CTAs of role `k`'s cycles, the median over `RUNS` launches.
fn overlap_cycles(
    r: &mut Run,
    iters: u32,
    ex2_iters: u32,
    mode: u32,
    k: usize,
) -> Result<(f64, Option<(f64, f64)>), MeasureError> {
    let (mut runs, mut during) = (Vec::new(), None);
    for _ in 0..RUNS {
        let (cyc, clocks) = launch_overlap(r, iters, ex2_iters, mode)?;
        let per: Vec<f64> = cyc.iter().map(|c| c[k] as f64).filter(|&c| c > 0.0).collect();
        if per.is_empty() {
            return Err(MeasureError::Check {
                what: format!("wgmma_mufu_overlap mode {mode}"),
                detail: format!("no CTA recorded cycles for role {k}"),
            });
        }
        runs.push(median(&per));
        during = during.or(clocks);
    }
    Ok((median(&runs), during))
}

/// MUFU.EX2 alone, and MUFU.EX2 and a wgmma chain side by side on every SM: the rates each
/// reaches beside the other say whether the SM runs them at once (FlashAttention-3's softmax
/// beside its GEMMs; docs/accuracy.md, "head dim 64").
pub fn run_overlap(r: &mut Run) -> Result<(), MeasureError> {
    if !WGMMA.runs_on(r.gpu.info.cc) {
        return Err(MeasureError::Unsupported(format!(
            "wgmma needs sm_90a (compute capability 9.0); this device is {}.{}",
            r.gpu.info.cc.0, r.gpu.info.cc.1
        )));
    }
    let iters = (r.plan.mma_iters / 4).max(1);
    launch_overlap(r, iters, 64, 3)?; // warm-up
    let (w_alone, _) = overlap_cycles(r, iters, 0, 1, 0)?;
    // An ex2 loop about as long as the wgmma loop alone, so that each runs beside the other
    // from start to end.
    let probe = 64 * iters;
    let (e_probe, _) = overlap_cycles(r, 0, probe, 2, 1)?;
    let ex2_iters = ((probe as f64 * w_alone / e_probe).round() as u32).max(1);
    let (e_alone, _) = overlap_cycles(r, 0, ex2_iters, 2, 1)?;
    let (w_both, during) = overlap_cycles(r, iters, ex2_iters, 3, 0)?;
    let (e_both, _) = overlap_cycles(r, iters, ex2_iters, 3, 1)?;
    let (t_both, _) = overlap_cycles(r, iters, ex2_iters, 3, 2)?;
    let clock = r.case_clock(during)?;
    let sms = r.gpu.info.sms;
    let ex2 = 128.0 * 16.0 * ex2_iters as f64;
    let flops = 2.0 * iters as f64 * 4.0 * FLOPS;
    let locator = r.locator(&format!(
        "wgmma.cu wgmma_mufu_overlap, {sms} CTAs (one per SM) x 384 threads: 2 warpgroups x {iters} iterations of 4          wgmma, 1 warpgroup x {ex2_iters} iterations of 16 ex2.approx per thread"
    ));
    let method = clock64_method(
        RUNS,
        "cycles from one __syncthreads to the end of each role's own loop, per CTA; the median CTA",
        "the SASS has one MUFU.EX2 (negated operand) per ex2.approx",
    );
    let together = format!(
        "alone: wgmma {:.0} FLOP/clk/SM in {w_alone:.0} cycles, MUFU.EX2 {:.2}/clk/SM in {e_alone:.0} cycles;          together: {t_both:.0} cycles for both, {:.2} of the sum of the two alone (1: no overlap, 0.5: full)",
        flops / w_alone,
        ex2 / e_alone,
        t_both / (w_alone + e_alone)
    );
    let mut alone = new_case("peak-mufu-ex2", Kind::Peak, Metric::Other("ops_per_clk_per_sm".into()), ex2 / e_alone);
    let mut ex2_beside =
        new_case("peak-mufu-ex2-beside-wgmma", Kind::Peak, Metric::Other("ops_per_clk_per_sm".into()), ex2 / e_both);
    let mut wgmma_beside =
        new_case("peak-wgmma-bf16-beside-mufu", Kind::Peak, Metric::FlopsPerClkPerSm, flops / w_both);
    for (c, what) in [
        (&mut alone, "ex2.approx.ftz.f32 (MUFU.EX2), 16 independent chains per thread, one warpgroup per SM"),
        (&mut ex2_beside, "the same ex2 loop while 2 warpgroups run wgmma.m64n256k16 bf16 (operands in shared memory)"),
        (&mut wgmma_beside, "wgmma.m64n256k16.f32.bf16.bf16, 2 warpgroups, while a third runs the ex2 loop"),
    ] {
        c.clock_mhz = Some(clock);
        c.implementation = Some(what.into());
        c.source = format!("{} wgmma_mufu_overlap", WGMMA.path);
        c.locator = locator.clone();
        c.method = Some(method.clone());
        c.notes = Some(together.clone());
    }
    wgmma_beside.dtype = Some("bf16".into());
    r.push(alone);
    r.push(ex2_beside);
    r.push(wgmma_beside);
    Ok(())
}
