//! fp8 GEMMs through cuBLASLt (the `gemm-fp8` group): D = A·B with A and B in e4m3
//! (`CUDA_R_8F_E4M3`), fp32 compute (`CUBLAS_COMPUTE_32F`) and bf16 output (`CUDA_R_16BF`), over
//! the suite's GEMM shapes, on compute capability 8.9 and newer (the fp8 tensor cores: Ada sm_89,
//! Hopper sm_90). cublasGemmEx has no fp8, so this uses the raw cuBLASLt API of cudarc's
//! `cublaslt::sys` (cudarc's safe `CudaBlasLT` has no fp8 and panics in its destructors).
//!
//! What cuBLASLt asks of fp8 (cublasLtMatmul's documented fp8 requirements), and how it is met:
//! - the "TN" layout, A transposed and B not (column-major terms): A is stored k × m with
//!   lda = k and `CUBLASLT_MATMUL_DESC_TRANSA = T`, B k × n with ldb = k and `TRANSB = N`, so both
//!   operands are K-major (the m × k A row-major); D is m × n column-major, ldd = m;
//! - 16-byte aligned pointers and leading dimensions: allocations are (256-byte aligned), the
//!   shapes are checked ([`fp8_shape_ok`]);
//! - C of D's type when D is not fp8: C is D itself (same layout) and beta = 0, so it is not read;
//! - scale factors: `CUBLASLT_MATMUL_DESC_A_SCALE_POINTER` / `B_SCALE_POINTER` are set to device
//!   floats of 1.0 (the inputs are already in e4m3's range, so there is no per-tensor scale to
//!   undo; 1.0 is also what an unset pointer means, set anyway so that the descriptor is the one
//!   real fp8 training/inference code builds). D's scale applies to fp8 outputs only: not set.
//!
//! `CUBLASLT_MATMUL_DESC_FAST_ACCUM` is left at its default, off: cuBLASLt then promotes the
//! tensor cores' partial sums to fp32 every few k-steps (Hopper's fp8 MMA keeps fewer accumulator
//! bits than fp32 within an instruction), the accurate mode; the entry check allows for what is
//! left of that ([`ACC_FP8`]). The algorithm is cuBLASLt's first heuristic pick for a 32 MiB
//! workspace (NVIDIA's recommendation for Hopper), as libraries calling cuBLASLt do.
//!
//! Inputs, timing and checks are those of the bf16/fp16 GEMMs (gemm.rs): device-side random fills
//! (`fill_e4m3`: `uniform` rounded with `cvt.rn.satfinite.e4m3x2.f32`) rotated over enough buffer
//! sets to exceed twice the L2, sampled entries checked against the host's product of the same
//! e4m3 values ([`round_e4m3`]) before timing, event-timed repetitions, the median.
//!
//! **Not yet run on a GPU**: written against cudarc 0.19's bindings and NVIDIA's cuBLASLt
//! documentation and fp8 sample, it is compiled and its host side (the e4m3 conversion, the shape
//! rule, the suites) unit-tested on a machine without one. A first run on an sm_89/sm_90 device
//! should confirm that the heuristic finds an algorithm and that the entry check passes.

use std::ffi::c_void;
use std::ptr::null_mut;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gemm::{buffer_sets, check_entries_within, seeds};
use super::gpu::{alloc, check_cublaslt, drv, fill};
use super::host::{gemm_entry, round_e4m3};
use super::runner::Run;
use super::suite::{FP8_DTYPE, GemmType, fp8_implementation, fp8_shape_ok};
use super::timing::time_runs;

/// The first compute capability with fp8 tensor cores (Ada).
const MIN_CC: (u32, u32) = (8, 9);
/// cuBLASLt's workspace: NVIDIA recommends 32 MiB on Hopper (4 MiB before); 32 MiB everywhere
/// costs nothing on these cards and leaves the heuristic every split-K choice.
const WORKSPACE: usize = 32 << 20;
/// Accumulation error allowed per unit of Σ|a·b| in the entry check: ten times the fp32 GEMMs'
/// (1e-4), for the fp8 tensor cores' shorter accumulation between cuBLASLt's fp32 promotions.
/// Still far below what a wrong layout or scale gives: a sum of the wrong products is off by
/// about √(2k)/3 where this allows k/4000 (at k = 16384: 60 against 4).
const ACC_FP8: f64 = 1e-3;

/// A cuBLASLt status as a [`MeasureError`].
fn ok(status: sys::cublasStatus_t, what: &str) -> Result<(), MeasureError> {
    if status == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(MeasureError::Cublas { what: format!("cuBLASLt {what}"), message: format!("{status:?}") })
    }
}

/// A cuBLASLt handle. The destructors here ignore a failing status: nothing can be done about it
/// then, and a panic would lose the other groups' results.
struct Handle(sys::cublasLtHandle_t);

impl Handle {
    fn new() -> Result<Handle, MeasureError> {
        let mut h = null_mut();
        // SAFETY: writes one handle.
        ok(unsafe { sys::cublasLtCreate(&mut h) }, "cublasLtCreate")?;
        Ok(Handle(h))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtCreate, destroyed once; the descriptors that used it are
        // dropped first (declared after it) and the work it enqueued has been waited for.
        let _ = unsafe { sys::cublasLtDestroy(self.0) };
    }
}

/// A matmul descriptor.
struct Desc(sys::cublasLtMatmulDesc_t);

impl Desc {
    fn new() -> Result<Desc, MeasureError> {
        let mut d = null_mut();
        // SAFETY: writes one descriptor. fp32 compute, fp32 alpha/beta (the only scale type
        // cuBLASLt takes with fp8 inputs).
        ok(
            unsafe {
                sys::cublasLtMatmulDescCreate(
                    &mut d,
                    sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    sys::cudaDataType::CUDA_R_32F,
                )
            },
            "cublasLtMatmulDescCreate",
        )?;
        Ok(Desc(d))
    }

    /// Sets `attr` to `value`, whose type must be the attribute's (int32 for TRANSA/TRANSB, a
    /// pointer for the scale pointers).
    fn set<T>(&self, attr: sys::cublasLtMatmulDescAttributes_t, value: &T) -> Result<(), MeasureError> {
        // SAFETY: reads size_of::<T>() bytes of `value`; the descriptor is live.
        let s = unsafe {
            sys::cublasLtMatmulDescSetAttribute(self.0, attr, value as *const T as *const c_void, size_of::<T>())
        };
        ok(s, &format!("cublasLtMatmulDescSetAttribute({attr:?})"))
    }
}

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulDescCreate, destroyed once.
        let _ = unsafe { sys::cublasLtMatmulDescDestroy(self.0) };
    }
}

/// A matrix layout (column-major, the default order).
struct Layout(sys::cublasLtMatrixLayout_t);

impl Layout {
    fn new(ty: sys::cudaDataType, rows: u64, cols: u64, ld: u64, what: &str) -> Result<Layout, MeasureError> {
        let mut l = null_mut();
        // SAFETY: writes one layout.
        ok(
            unsafe { sys::cublasLtMatrixLayoutCreate(&mut l, ty, rows, cols, ld as i64) },
            &format!("cublasLtMatrixLayoutCreate({what})"),
        )?;
        Ok(Layout(l))
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatrixLayoutCreate, destroyed once.
        let _ = unsafe { sys::cublasLtMatrixLayoutDestroy(self.0) };
    }
}

/// A heuristic preference.
struct Pref(sys::cublasLtMatmulPreference_t);

impl Pref {
    fn new(workspace: usize) -> Result<Pref, MeasureError> {
        let mut p = null_mut();
        // SAFETY: writes one preference.
        ok(unsafe { sys::cublasLtMatmulPreferenceCreate(&mut p) }, "cublasLtMatmulPreferenceCreate")?;
        let pref = Pref(p);
        // The attribute is a uint64_t.
        let bytes = workspace as u64;
        // SAFETY: reads 8 bytes of `bytes`; the preference is live.
        ok(
            unsafe {
                sys::cublasLtMatmulPreferenceSetAttribute(
                    pref.0,
                    sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &bytes as *const u64 as *const c_void,
                    size_of::<u64>(),
                )
            },
            "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
        )?;
        Ok(pref)
    }
}

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulPreferenceCreate, destroyed once.
        let _ = unsafe { sys::cublasLtMatmulPreferenceDestroy(self.0) };
    }
}

/// `cublasLtGetVersion`'s major·10000 + minor·100 + patch as "13.1.0".
fn version_string(v: usize) -> String {
    format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
}

/// What the group shares across shapes: the handle, the scale factors, the workspace.
struct Lt {
    // Dropped in this order: the device buffers, then the handle (fields drop top to bottom).
    /// Device floats of 1.0 for A's and B's scale pointers.
    scale_a: CudaSlice<f32>,
    scale_b: CudaSlice<f32>,
    workspace: CudaSlice<u8>,
    handle: Handle,
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    if !r.plan.gemm_types.contains(&GemmType::Fp8) {
        return Ok(());
    }
    // The device first: an older card is "skipped" (not for this device) whatever the libraries.
    if r.gpu.info.cc < MIN_CC {
        return Err(MeasureError::Unsupported(format!(
            "fp8 GEMMs need fp8 tensor cores (compute capability {}.{} or newer); this device is {}.{}",
            MIN_CC.0, MIN_CC.1, r.gpu.info.cc.0, r.gpu.info.cc.1
        )));
    }
    // cudarc panics on the first call into a library it cannot open: check first.
    check_cublaslt()?;
    // SAFETY: reads a constant of the library.
    let v = unsafe { sys::cublasLtGetVersion() };
    r.cublaslt_version = Some(version_string(v));
    // cuBLASLt works in the thread's current context: make it ours.
    r.gpu.ctx.bind_to_thread().map_err(drv("binding the context before cublasLtCreate"))?;
    let stream = r.gpu.stream.clone();
    let mut lt = Lt {
        scale_a: stream.clone_htod(&[1.0f32]).map_err(drv("copying A's scale factor"))?,
        scale_b: stream.clone_htod(&[1.0f32]).map_err(drv("copying B's scale factor"))?,
        workspace: alloc::<u8>(&r.gpu, WORKSPACE, "the cuBLASLt workspace")?,
        handle: Handle::new()?,
    };
    let mut res = Ok(());
    for shape in r.plan.gemm_shapes.clone() {
        res = one(r, &mut lt, shape);
        if res.is_err() {
            break;
        }
    }
    // Whatever happened, what was enqueued finishes before the buffers and the handle go.
    let synced = r.gpu.sync("fp8 GEMMs");
    res.and(synced)
}

struct Set {
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
    d: CudaSlice<half::bf16>,
}

fn one(r: &mut Run, lt: &mut Lt, (m, n, k): (u64, u64, u64)) -> Result<(), MeasureError> {
    if !fp8_shape_ok((m, n, k)) {
        return Err(MeasureError::Unsupported(format!(
            "fp8 GEMM {m}x{n}x{k}: cuBLASLt's fp8 kernels need m, n and k multiples of 16"
        )));
    }
    let what = format!("cuBLASLt fp8 GEMM {m}x{n}x{k}");
    let stream = r.gpu.stream.clone();
    // 1-byte A and B, 2-byte D.
    let set_bytes = m * k + k * n + 2 * m * n;
    let sets = buffer_sets(set_bytes, r.gpu.info.l2_bytes, r.gpu.info.memory_bytes);
    let mut bufs: Vec<Set> = Vec::new();
    for s in 0..sets {
        let (sa, sb) = seeds(s);
        let mut a = alloc::<u8>(&r.gpu, (m * k) as usize, "fp8 GEMM A")?;
        let mut b = alloc::<u8>(&r.gpu, (k * n) as usize, "fp8 GEMM B")?;
        // D is written whole (beta = 0 reads nothing).
        let d = alloc::<half::bf16>(&r.gpu, (m * n) as usize, "fp8 GEMM D")?;
        fill(&mut r.gpu, "fill_e4m3", &mut a, sa)?;
        fill(&mut r.gpu, "fill_e4m3", &mut b, sb)?;
        bufs.push(Set { a, b, d });
    }

    let desc = Desc::new()?;
    use sys::cublasLtMatmulDescAttributes_t as A;
    // cublasOperation_t is an int32 attribute: T for A, N for B (the TN layout fp8 requires).
    desc.set(A::CUBLASLT_MATMUL_DESC_TRANSA, &(cublasOperation_t::CUBLAS_OP_T as i32))?;
    desc.set(A::CUBLASLT_MATMUL_DESC_TRANSB, &(cublasOperation_t::CUBLAS_OP_N as i32))?;
    // The attributes hold the device pointers themselves (void*), valid while `lt` lives.
    let (pa, _ga) = lt.scale_a.device_ptr(&stream);
    let (pb, _gb) = lt.scale_b.device_ptr(&stream);
    desc.set(A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &(pa as *const c_void))?;
    desc.set(A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &(pb as *const c_void))?;
    let e4m3 = sys::cudaDataType::CUDA_R_8F_E4M3;
    let la = Layout::new(e4m3, k, m, k, "A: k x m, lda = k")?;
    let lb = Layout::new(e4m3, k, n, k, "B: k x n, ldb = k")?;
    // C and D: one layout, one buffer (C is not read with beta = 0, and must have D's type).
    let ld = Layout::new(sys::cudaDataType::CUDA_R_16BF, m, n, m, "C/D: m x n, ldd = m")?;
    let pref = Pref::new(WORKSPACE)?;
    // SAFETY: all zeros is a valid heuristic result (plain data; status 0 is SUCCESS); it is
    // only read after cuBLASLt has written it.
    let mut heur: sys::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
    let mut found = 0i32;
    // SAFETY: room for the one result asked for; every descriptor is live.
    ok(
        unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                lt.handle.0,
                desc.0,
                la.0,
                lb.0,
                ld.0,
                ld.0,
                pref.0,
                1,
                &mut heur,
                &mut found,
            )
        },
        &format!("cublasLtMatmulAlgoGetHeuristic ({m}x{n}x{k})"),
    )?;
    if found < 1 {
        return Err(MeasureError::Cublas {
            what: format!("cuBLASLt cublasLtMatmulAlgoGetHeuristic ({m}x{n}x{k})"),
            message: "no algorithm for e4m3 x e4m3 -> bf16 in the TN layout with a 32 MiB workspace on this device"
                .into(),
        });
    }
    ok(heur.state, &format!("the heuristic's algorithm for {m}x{n}x{k}"))?;

    let (alpha, beta) = (1.0f32, 0.0f32);
    let (handle, workspace) = (&lt.handle, &mut lt.workspace);
    let mut gemm = |s: &mut Set| -> Result<(), MeasureError> {
        let (a, _ga) = s.a.device_ptr(&stream);
        let (b, _gb) = s.b.device_ptr(&stream);
        let (d, _gd) = s.d.device_ptr_mut(&stream);
        let (w, _gw) = workspace.device_ptr_mut(&stream);
        // SAFETY: A is k × m (lda k), B k × n (ldb k), D m × n (ldd m), allocated so; alpha and
        // beta are host floats (the default pointer mode); the workspace holds WORKSPACE bytes,
        // the most the algorithm was chosen for; everything outlives the enqueued work (the
        // group synchronises before dropping them).
        let status = unsafe {
            sys::cublasLtMatmul(
                handle.0,
                desc.0,
                &alpha as *const f32 as *const c_void,
                a as *const c_void,
                la.0,
                b as *const c_void,
                lb.0,
                &beta as *const f32 as *const c_void,
                d as *const c_void,
                ld.0,
                d as *mut c_void,
                ld.0,
                &heur.algo,
                w as *mut c_void,
                WORKSPACE,
                stream.cu_stream() as sys::cudaStream_t,
            )
        };
        ok(status, "cublasLtMatmul")
    };
    gemm(&mut bufs[0])?;
    r.gpu.sync(&what)?;
    let (sa, sb) = seeds(0);
    // A[i, l] is element l + i k of A's buffer (k × m, column-major), B[l, j] element l + j k.
    check_entries_within(
        &r.gpu,
        &bufs[0].d,
        (m, n, k),
        r.plan.gemm_check_samples,
        |i, j| gemm_entry(round_e4m3, k, |l| l + i * k, |l| l + j * k, sa, sb),
        |i, j| i + j * m,
        &what,
        ACC_FP8,
    )?;
    let nsets = bufs.len();
    let t = time_runs(&r.gpu, r.plan.warmups, r.plan.repetitions, |i| gemm(&mut bufs[i % nsets]))?;
    let tflops = 2.0 * (m * n * k) as f64 / (t.median_ms * 1e-3) / 1e12;
    let clock = r.case_clock(t.clocks)?;
    let mut c = new_case(format!("gemm-cublas-fp8-{m}x{n}x{k}"), Kind::Gemm, Metric::Tflops, tflops);
    c.clock_mhz = Some(clock);
    c.dtype = Some(FP8_DTYPE.into());
    (c.m, c.n, c.k) = (Some(m), Some(n), Some(k));
    c.layout = Some(
        "column-major TN (cuBLASLt's fp8 layout): D (m x n) = A^T B with A stored k x m and B k x n, both K-major"
            .into(),
    );
    c.implementation = Some(fp8_implementation(r.cublaslt_version.as_deref().unwrap_or("")));
    c.source = "cuBLASLt".into();
    c.locator = r.locator(&format!("cublasLtMatmul {m}x{n}x{k} fp8 e4m3 TN, {nsets} rotating input set(s)"));
    c.notes = Some(format!(
        "TFLOP/s = 2 m n k / median time ({:.4} ms; runs {:.4} to {:.4} ms); {} entries checked against the host's \
         product of the same e4m3 inputs first",
        t.median_ms,
        t.ms.iter().copied().fold(f64::INFINITY, f64::min),
        t.ms.iter().copied().fold(0.0, f64::max),
        r.plan.gemm_check_samples
    ));
    r.push(c);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where libcublasLt cannot be opened (as on machines without CUDA), the group's guard says
    /// so as a setup error instead of letting cudarc panic on the first call.
    #[test]
    fn a_missing_cublaslt_is_an_error_not_a_panic() {
        match check_cublaslt() {
            Ok(()) => eprintln!("libcublasLt can be opened here: nothing to check"),
            Err(e) => {
                assert!(matches!(e, MeasureError::MissingLibrary { .. }) && e.is_setup(), "{e}");
                assert!(e.to_string().contains("libcublasLt.so.13"), "{e}");
            }
        }
    }

    #[test]
    fn versions_read_like_cublas() {
        assert_eq!(version_string(130100), "13.1.0");
        assert_eq!(version_string(120902), "12.9.2");
    }
}
