//! Shared-memory load bandwidth with and without bank conflicts (validation/cuda/smem.cu).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::drv;
use super::host::smem_expected;
use super::kernels::SMEM;
use super::runner::Run;
use super::timing::time_runs;

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    for stride in r.plan.smem_strides.clone() {
        one(r, stride)?;
    }
    Ok(())
}

fn one(r: &mut Run, stride: u32) -> Result<(), MeasureError> {
    let f = r.gpu.function(&SMEM, "smem_lds")?;
    let (ctas, threads) = (2 * r.gpu.info.sms, 1024u32);
    let total = (ctas * threads) as usize;
    let mut out = r.gpu.stream.alloc_zeros::<u32>(total).map_err(drv("allocating the sums"))?;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let stream = r.gpu.stream.clone();
    let launch = |iters: u32, out: &mut cudarc::driver::CudaSlice<u32>| {
        // SAFETY: smem_lds(u32* out, u32 iters, u32 stride) writes one word per thread.
        unsafe { stream.launch_builder(&f).arg(out).arg(&iters).arg(&stride).launch(cfg) }
            .map(|_| ())
            .map_err(drv("launching smem_lds"))
    };
    let what = format!("smem_lds stride {stride}");
    launch(3, &mut out)?;
    let got = r.gpu.stream.clone_dtoh(&out).map_err(drv("reading the sums"))?;
    for (t, &g) in got.iter().enumerate() {
        let want = smem_expected(t as u32 % 32, stride, 3);
        if g != want {
            return Err(MeasureError::Check { what, detail: format!("thread {t} read {g:#x}, expected {want:#x}") });
        }
    }
    let iters = r.plan.smem_iters;
    let t = time_runs(&r.gpu, r.plan.warmups, r.plan.repetitions, |_| launch(iters, &mut out))?;
    let bytes = total as u64 * iters as u64 * 16 * 4;
    let gbps = bytes as f64 / (t.median_ms * 1e-3) / 1e9;
    let clock = r.case_clock(t.clocks)?;
    // Lanes land in 32 / gcd(stride, 32) distinct banks: a gcd-way conflict.
    let ways = (1..=32u32).rev().find(|d| stride.is_multiple_of(*d) && 32 % d == 0).unwrap_or(1);
    let per_clk_sm = gbps * 1e9 / (clock * 1e6) / r.gpu.info.sms as f64;
    let mut c = new_case(format!("bw-shared-lds32-stride{stride}"), Kind::Bandwidth, Metric::Gbps, gbps);
    c.clock_mhz = Some(clock);
    c.level = Some("shared".into());
    c.kernel = Some(format!("lds32 stride {stride} ({ways}-way bank conflict)"));
    c.implementation =
        Some(format!("smem_lds: {ctas} CTAs x 1024 threads, 16 volatile 32-bit LDS per iteration, {iters} iterations"));
    c.source = format!("{} smem_lds", SMEM.path);
    c.locator = r.locator(&format!("smem.cu smem_lds, word stride {stride} between lanes"));
    c.notes = Some(format!(
        "useful bytes (4 per lane per LDS) / median time; {per_clk_sm:.1} B/clk/SM at {clock:.0} MHz \
         (conflict-free peak: 128 B/clk/SM)"
    ));
    r.push(c);
    Ok(())
}
