//! cuBLAS GEMMs (cublasGemmEx through cudarc's `Gemm`, fp32 accumulation) over the suite's
//! shapes, bf16 and fp16; and the pieces the other GEMM measurements share (buffer sets, the
//! entry check). fp8 (e4m3) goes through cuBLASLt in its own group: `gemm_fp8`.

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::{Gpu, alloc, drv, fill};
use super::host::{SplitMix64, bf16_to_f32, f16_to_f32, gemm_entry, gemm_entry_within, round_bf16, round_f16};
use super::runner::Run;
use super::suite::GemmType;
use super::timing::time_runs;

/// Buffer sets rotated through, so that their total exceeds twice the L2 (at most `MAX_SETS`,
/// and within a quarter of the device memory).
const MAX_SETS: u64 = 64;

pub fn buffer_sets(set_bytes: u64, l2: u64, memory: u64) -> u64 {
    let want = (2 * l2).div_ceil(set_bytes.max(1)).clamp(1, MAX_SETS);
    want.min((memory / 4 / set_bytes.max(1)).max(1))
}

fn blas_err(what: &str) -> impl FnOnce(cudarc::cublas::result::CublasError) -> MeasureError + '_ {
    move |e| MeasureError::Cublas { what: what.to_string(), message: format!("{e:?}") }
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    let blas = CudaBlas::new(r.gpu.stream.clone()).map_err(blas_err("creating a handle"))?;
    let mut v = 0i32;
    // SAFETY: writes one int through a live handle.
    if unsafe { cudarc::cublas::sys::cublasGetVersion_v2(*blas.handle(), &mut v) }.result().is_ok() {
        r.cublas_version = Some(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100));
    }
    for ty in r.plan.gemm_types.clone() {
        for (m, n, k) in r.plan.gemm_shapes.clone() {
            match ty {
                GemmType::Bf16 => one::<half::bf16>(r, &blas, ty, (m, n, k))?,
                GemmType::Fp16 => one::<half::f16>(r, &blas, ty, (m, n, k))?,
                // cublasGemmEx has no fp8: the gemm-fp8 group measures it with cuBLASLt.
                GemmType::Fp8 => {}
            }
        }
    }
    Ok(())
}

/// What differs between the two 16-bit types.
pub(super) trait Elem: cudarc::driver::DeviceRepr + Copy + Default {
    const FILL: &'static str;
    const EPS: f64;
    fn round(x: f32) -> f32;
    fn value(self) -> f32;
    fn one() -> Self;
    fn zero() -> Self;
}

impl Elem for half::bf16 {
    const FILL: &'static str = "fill_bf16";
    const EPS: f64 = 1.0 / 256.0;
    fn round(x: f32) -> f32 {
        round_bf16(x)
    }
    fn value(self) -> f32 {
        bf16_to_f32(self.to_bits())
    }
    fn one() -> Self {
        half::bf16::ONE
    }
    fn zero() -> Self {
        half::bf16::ZERO
    }
}

impl Elem for half::f16 {
    const FILL: &'static str = "fill_f16";
    const EPS: f64 = 1.0 / 2048.0;
    fn round(x: f32) -> f32 {
        round_f16(x)
    }
    fn value(self) -> f32 {
        f16_to_f32(self.to_bits())
    }
    fn one() -> Self {
        half::f16::ONE
    }
    fn zero() -> Self {
        half::f16::ZERO
    }
}

struct Set<T> {
    a: CudaSlice<T>,
    b: CudaSlice<T>,
    c: CudaSlice<T>,
}

/// The fill seeds of buffer set `set`'s A and B.
pub(super) fn seeds(set: u64) -> (u32, u32) {
    (3000 + 2 * set as u32, 3001 + 2 * set as u32)
}

/// Checks sampled entries of set 0's C (column-major m × n) against the host's product.
pub fn check_entries<T: Elem>(
    gpu: &Gpu,
    c: &CudaSlice<T>,
    (m, n, k): (u64, u64, u64),
    samples: usize,
    entry: impl Fn(u64, u64) -> (f64, f64),
    index: impl Fn(u64, u64) -> u64,
    what: &str,
) -> Result<(), MeasureError> {
    check_entries_within(gpu, c, (m, n, k), samples, entry, index, what, ACC_FP32)
}

/// fp32 accumulation error allowed by [`check_entries`], per unit of Σ|a·b|.
const ACC_FP32: f64 = 1e-4;

/// [`check_entries`] with the accumulation error allowed set to `acc` · Σ|a·b|
/// ([`gemm_entry_within`]).
#[allow(clippy::too_many_arguments)]
pub fn check_entries_within<T: Elem>(
    gpu: &Gpu,
    c: &CudaSlice<T>,
    (m, n, k): (u64, u64, u64),
    samples: usize,
    entry: impl Fn(u64, u64) -> (f64, f64),
    index: impl Fn(u64, u64) -> u64,
    what: &str,
    acc: f64,
) -> Result<(), MeasureError> {
    let mut rng = SplitMix64(m ^ (n << 20) ^ (k << 40));
    for s in 0..samples {
        // Corners first, then random entries.
        let (i, j) = match s {
            0 => (0, 0),
            1 => (m - 1, n - 1),
            _ => (rng.below(m), rng.below(n)),
        };
        let at = index(i, j) as usize;
        let got = gpu.stream.clone_dtoh(&c.slice(at..at + 1)).map_err(drv("reading a GEMM entry"))?[0].value() as f64;
        let (want, abs) = entry(i, j);
        if !gemm_entry_within(got, want, abs, T::EPS, acc) {
            return Err(MeasureError::Check {
                what: what.to_string(),
                detail: format!("C[{i}, {j}] = {got}, the host's product of the same inputs gives {want:.6}"),
            });
        }
    }
    Ok(())
}

fn one<T: Elem>(r: &mut Run, blas: &CudaBlas, ty: GemmType, (m, n, k): (u64, u64, u64)) -> Result<(), MeasureError>
where
    CudaBlas: Gemm<T>,
{
    let set_bytes = 2 * (m * k + k * n + m * n);
    let sets = buffer_sets(set_bytes, r.gpu.info.l2_bytes, r.gpu.info.memory_bytes);
    let mut bufs: Vec<Set<T>> = Vec::new();
    for s in 0..sets {
        let (sa, sb) = seeds(s);
        let mut a = alloc::<T>(&r.gpu, (m * k) as usize, "GEMM A")?;
        let mut b = alloc::<T>(&r.gpu, (k * n) as usize, "GEMM B")?;
        // C is written whole (beta = 0 reads nothing).
        let c = alloc::<T>(&r.gpu, (m * n) as usize, "GEMM C")?;
        fill(&mut r.gpu, T::FILL, &mut a, sa)?;
        fill(&mut r.gpu, T::FILL, &mut b, sb)?;
        bufs.push(Set { a, b, c });
    }
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: m as i32,
        n: n as i32,
        k: k as i32,
        alpha: T::one(),
        lda: m as i32,
        ldb: k as i32,
        beta: T::zero(),
        ldc: m as i32,
    };
    let gemm = |s: &mut Set<T>| -> Result<(), MeasureError> {
        // SAFETY: A is m × k (lda m), B k × n (ldb k), C m × n (ldc m), column-major, all allocated so.
        unsafe { blas.gemm(cfg, &s.a, &s.b, &mut s.c) }.map_err(blas_err("cublasGemmEx"))
    };
    let what = format!("cuBLAS {} GEMM {m}x{n}x{k}", ty.as_str());
    gemm(&mut bufs[0])?;
    r.gpu.sync(&what)?;
    let (sa, sb) = seeds(0);
    check_entries(
        &r.gpu,
        &bufs[0].c,
        (m, n, k),
        r.plan.gemm_check_samples,
        |i, j| gemm_entry(T::round, k, |l| i + l * m, |l| l + j * k, sa, sb),
        |i, j| i + j * m,
        &what,
    )?;
    let nsets = bufs.len();
    let t = time_runs(&r.gpu, r.plan.warmups, r.plan.repetitions, |i| gemm(&mut bufs[i % nsets]))?;
    let tflops = 2.0 * (m * n * k) as f64 / (t.median_ms * 1e-3) / 1e12;
    let clock = r.case_clock(t.clocks)?;
    let mut c = new_case(format!("gemm-cublas-{}-{m}x{n}x{k}", ty.as_str()), Kind::Gemm, Metric::Tflops, tflops);
    c.clock_mhz = Some(clock);
    c.dtype = Some(format!("{} in, fp32 accumulate, {} out", ty.as_str(), ty.as_str()));
    (c.m, c.n, c.k) = (Some(m), Some(n), Some(k));
    c.layout = Some("column-major, C = A B (cuBLAS NN)".into());
    c.implementation = Some(format!(
        "cuBLAS {} cublasGemmEx (CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)",
        r.cublas_version.as_deref().unwrap_or("")
    ));
    c.source = "cuBLAS".into();
    c.locator = r.locator(&format!("cublasGemmEx {m}x{n}x{k} {}, {nsets} rotating input set(s)", ty.as_str()));
    c.notes = Some(format!(
        "TFLOP/s = 2 m n k / median time ({:.4} ms; runs {:.4} to {:.4} ms); {} entries checked against the host's \
         product first",
        t.median_ms,
        t.ms.iter().copied().fold(f64::INFINITY, f64::min),
        t.ms.iter().copied().fold(0.0, f64::max),
        r.plan.gemm_check_samples
    ));
    r.push(c);
    Ok(())
}
