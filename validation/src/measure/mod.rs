//! The measurement harness behind `gpusim measure`: microbenchmarks (our own CUDA C++ in
//! `validation/cuda/`), cuBLAS GEMMs (bf16/fp16 with cublasGemmEx, fp8 with cuBLASLt) and the CUDA twins of the GEMM recipes (`workloads/cuda/`),
//! run on a real GPU and returned as [`Measurements`] in the schema of [`crate::measurement`].
//!
//! **Building.** The GPU code is behind the crate feature `cuda` (the `gpusim` binary's feature
//! `cuda` turns it on). It uses cudarc with `dynamic-loading`: the driver (`libcuda.so`), NVRTC
//! (`libnvrtc.so.13`) and cuBLAS (`libcublas.so.13`) are opened at run time, so the harness
//! builds on any machine, without a CUDA toolkit; cuBLASLt (`libcublasLt.so.13`, shipped with
//! cuBLAS) likewise, for the fp8 GEMMs. Before the first call into each library the
//! harness checks that it can be loaded (`is_culib_present`), so a machine without a driver gets
//! [`MeasureError::MissingLibrary`], never a panic. Without the feature, [`run`] returns
//! [`MeasureError::NotBuilt`].
//!
//! **Kernels** ([`kernels`]) are compiled with NVRTC for the device's `sm_XY` (`sm_90a` for the
//! wgmma sources) straight to a cubin (not PTX, which a driver older than the NVRTC may reject).
//!
//! **Timing.** Event-timed benchmarks (STREAM, L2, shared memory, GEMM) run `warmups` untimed
//! times, then `repetitions` times back to back between CUDA events created with
//! `CU_EVENT_DEFAULT`; the median is reported. Latencies and per-SM tensor rates are timed with
//! `clock64` inside the kernel (SM cycles, whatever the clock). Inputs are random (device-side
//! fills whose values the host reproduces, [`host`]); GEMM inputs rotate over enough buffer sets
//! that their total exceeds twice the L2. Every result is checked before it is timed: GEMM
//! entries against a CPU product, STREAM and L2 sums and copies exactly, the pointer chase's end
//! point, MMA accumulators with all-ones inputs.
//!
//! **Clocks.** With NVML (`libnvidia-ml.so.1`, part of the driver) the SM and memory clocks are
//! sampled while the timed runs run, and the driver version is NVML's. Without it the SM clock is
//! measured with `clock64` against `%globaltimer` in a spin kernel (light load: under heavy
//! tensor load the real clock may be lower) and the memory clock is the driver's maximum; the
//! file's `[device] clock_source` says which.
//!
//! Modules: [`suite`] (what quick and full measure), [`host`] (CPU twins of the kernels'
//! arithmetic), [`kernels`] (the sources); with `cuda`: `gpu` (libraries, context, device
//! facts), `nvml`, `compile` (NVRTC), `timing`, one module per benchmark (`chase`, `stream`,
//! `l2`, `smem`, `mma`, `wgmma`, `gemm`, `gemm_fp8`, `twins`) and `runner` (the order, the
//! cases).

mod error;
pub mod host;
pub mod kernels;
pub mod suite;

#[cfg(feature = "cuda")]
mod chase;
#[cfg(feature = "cuda")]
mod compile;
#[cfg(feature = "cuda")]
mod gemm;
#[cfg(feature = "cuda")]
mod gemm_fp8;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod l2;
#[cfg(feature = "cuda")]
mod mma;
#[cfg(feature = "cuda")]
mod nvml;
#[cfg(feature = "cuda")]
mod runner;
#[cfg(feature = "cuda")]
mod smem;
#[cfg(feature = "cuda")]
mod stream;
#[cfg(feature = "cuda")]
mod timing;
#[cfg(feature = "cuda")]
mod twins;
#[cfg(feature = "cuda")]
mod wgmma;

pub use error::MeasureError;
pub use suite::{GROUPS, Plan, Suite};

use crate::measurement::Measurements;

/// Whether this build has the GPU harness (the `cuda` feature).
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    pub suite: Suite,
    /// CUDA device ordinal.
    pub device: usize,
    /// Groups to run ([`GROUPS`]); empty: all.
    pub only: Vec<String>,
    /// The gpusim version, for the cases' `source`.
    pub version: String,
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    pub measurements: Measurements,
    /// Groups that failed or were skipped ([`MeasureError::Unsupported`]: not for this device),
    /// with why; the other groups' cases are still there.
    pub failures: Vec<(String, MeasureError)>,
    /// Lines for the file's header comment (suite, device, libraries, failures).
    pub header: Vec<String>,
}

/// Checks `--only` against [`GROUPS`].
pub fn check_groups(only: &[String]) -> Result<(), MeasureError> {
    for g in only {
        if !GROUPS.contains(&g.as_str()) {
            return Err(MeasureError::Usage(format!("unknown group `{g}`: the groups are {}", GROUPS.join(", "))));
        }
    }
    Ok(())
}

/// Runs the suite on the device. `progress` gets one line per step (the binary prints them).
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Outcome, MeasureError> {
    #[cfg(feature = "cuda")]
    {
        check_groups(&opts.only)?;
        runner::run(opts, progress)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (opts, progress);
        Err(MeasureError::NotBuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_checked() {
        assert!(check_groups(&["gemm".into(), "chase".into()]).is_ok());
        let e = check_groups(&["gemms".into()]).unwrap_err();
        assert!(e.is_setup() && e.to_string().contains("gemms"), "{e}");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_feature_run_says_so() {
        let opts = Options { suite: Suite::Quick, device: 0, only: vec![], version: "0".into() };
        let e = run(&opts, &mut |_| {}).unwrap_err();
        assert!(matches!(e, MeasureError::NotBuilt) && e.is_setup());
        assert!(e.to_string().contains("--features cuda"), "{e}");
    }
}
