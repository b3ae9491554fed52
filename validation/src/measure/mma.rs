//! mma.sync throughput (FLOP per clock per SM) and latency (cycles) per data type
//! (validation/cuda/mma.cu).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::drv;
use super::host::median;
use super::kernels::MMA;
use super::runner::{Run, clock64_method};
use super::suite::MmaType;

/// Independent accumulators per warp in mma_tput_* (CHAINS in mma.cu).
const CHAINS: u64 = 8;
const TPUT_THREADS: u32 = 512;
/// Timed launches of each kernel; the median counts.
const RUNS: u32 = 3;

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    for t in r.plan.mma_types.clone() {
        throughput(r, t)?;
        latency(r, t)?;
    }
    Ok(())
}

/// What a launch returns: each thread's output, each CTA's cycles, NVML's clocks while it ran.
type Launched = (Vec<f32>, Vec<u64>, Option<(f64, f64)>);

/// Launches `name` with (out, iters, ones, cycles).
fn launch(r: &mut Run, name: &str, ctas: u32, threads: u32, iters: u32, ones: bool) -> Result<Launched, MeasureError> {
    let f = r.gpu.function(&MMA, name)?;
    let s = &r.gpu.stream;
    let mut out = s.alloc_zeros::<f32>((ctas * threads) as usize).map_err(drv("allocating the outputs"))?;
    let mut cycles = s.alloc_zeros::<u64>(ctas as usize).map_err(drv("allocating the cycle counts"))?;
    let ones = ones as u32;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: mma_*(float* out, u32 iters, u32 ones, u64* cycles) writes one float per thread and
    // one count per CTA.
    unsafe { s.launch_builder(&f).arg(&mut out).arg(&iters).arg(&ones).arg(&mut cycles).launch(cfg) }
        .map_err(drv(format!("launching {name}")))?;
    let during = r.gpu.nvml_clocks();
    let out_h = s.clone_dtoh(&out).map_err(drv("reading the outputs"))?;
    let cyc_h = s.clone_dtoh(&cycles).map_err(drv("reading the cycle counts"))?;
    Ok((out_h, cyc_h, during))
}

/// With all-ones operands every accumulator gains K per MMA: each thread's sum must be exact.
fn check_ones(name: &str, out: &[f32], want: f64) -> Result<(), MeasureError> {
    match out.iter().position(|&x| x as f64 != want) {
        None => Ok(()),
        Some(i) => Err(MeasureError::Check {
            what: format!("{name} with all-ones operands"),
            detail: format!("thread {i} holds {}, expected {want}", out[i]),
        }),
    }
}

fn throughput(r: &mut Run, t: MmaType) -> Result<(), MeasureError> {
    let name = format!("mma_tput_{}", t.suffix());
    let k = t.shape().2 as f64;
    let ctas = r.gpu.info.sms;
    let (out, _, _) = launch(r, &name, ctas, TPUT_THREADS, 64, true)?;
    check_ones(&name, &out, (CHAINS * 4) as f64 * 64.0 * k)?;
    let iters = r.plan.mma_iters;
    launch(r, &name, ctas, TPUT_THREADS, iters, false)?; // warm-up
    let warps = (TPUT_THREADS / 32) as f64;
    let flops_per_cta = warps * iters as f64 * CHAINS as f64 * t.flops() as f64;
    let (mut rates, mut during) = (Vec::new(), None);
    for _ in 0..RUNS {
        let (_, cycles, clocks) = launch(r, &name, ctas, TPUT_THREADS, iters, false)?;
        let per_cta: Vec<f64> = cycles.iter().filter(|&&c| c > 0).map(|&c| flops_per_cta / c as f64).collect();
        rates.push(median(&per_cta));
        during = during.or(clocks);
    }
    let clock = r.case_clock(during)?;
    let rate = median(&rates);
    let mut c = new_case(format!("peak-mma-{}", t.suffix()), Kind::Peak, Metric::FlopsPerClkPerSm, rate);
    c.clock_mhz = Some(clock);
    c.dtype = Some(t.suffix().into());
    c.implementation = Some(format!("{} ({}), {} independent accumulators per warp", t.ptx(), t.sass(), CHAINS));
    c.source = format!("{} {name}", MMA.path);
    c.locator =
        r.locator(&format!("mma.cu {name}, {ctas} CTAs (one per SM) x {TPUT_THREADS} threads, {iters} iterations"));
    c.method = Some(clock64_method(
        RUNS,
        "cycles between two __syncthreads around the loop, per CTA; the median CTA",
        "all-ones operands give every accumulator iters x K",
    ));
    c.notes = Some(format!(
        "{} per warp instruction; {:.1} T{} at {clock:.0} MHz over {} SMs",
        t.flops(),
        rate * clock * 1e6 * ctas as f64 / 1e12,
        if t == MmaType::S8 { "OP/s" } else { "FLOP/s" },
        ctas
    ));
    r.push(c);
    Ok(())
}

fn latency(r: &mut Run, t: MmaType) -> Result<(), MeasureError> {
    let name = format!("mma_lat_{}", t.suffix());
    let k = t.shape().2 as f64;
    let (out, _, _) = launch(r, &name, 1, 32, 64, true)?;
    check_ones(&name, &out, 4.0 * 64.0 * k)?;
    let chain = r.plan.mma_latency_chain;
    launch(r, &name, 1, 32, chain, false)?; // warm-up
    let (mut lat, mut during) = (Vec::new(), None);
    for _ in 0..RUNS {
        let (_, cycles, clocks) = launch(r, &name, 1, 32, chain, false)?;
        lat.push(cycles[0] as f64 / chain as f64);
        during = during.or(clocks);
    }
    let clock = r.case_clock(during)?;
    let mut c = new_case(format!("lat-mma-{}", t.suffix()), Kind::Latency, Metric::Cycles, median(&lat));
    c.clock_mhz = Some(clock);
    c.level = Some(format!("instruction ({})", t.sass()));
    c.dtype = Some(t.suffix().into());
    c.implementation = Some(format!("{}: one warp, each MMA accumulating into the previous one's result", t.ptx()));
    c.source = format!("{} {name}", MMA.path);
    c.locator = r.locator(&format!("mma.cu {name}, a dependent chain of {chain} MMAs"));
    c.method = Some(clock64_method(RUNS, "cycles of the chain / its length", "all-ones operands give iters x K"));
    r.push(c);
    Ok(())
}
