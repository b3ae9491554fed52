//! The CUDA twins of the GEMM recipes (workloads/cuda/), run as they are: the Ampere twin
//! (cp.async + ldmatrix + mma.sync, any sm_80+) and, on sm_90a, the Hopper twin (TMA + wgmma,
//! tensor maps encoded with cuTensorMapEncodeTiled). Their cases have kind `gemm_twin`: each is
//! one fixed kernel design, not a tuned library, so correlate simulates it with the twin's own
//! recipe (`gpusim_workloads::gemm::Twin::recipe`, checked against the twin's SASS by
//! workloads/tests/cuda_twins.rs), never with the default recipe.

use cudarc::driver::sys::{self, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};

use gpusim_workloads::gemm::Twin as Design;

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gemm::{buffer_sets, check_entries};
use super::gpu::{Gpu, alloc, drv, fill};
use super::host::round_bf16;
use super::kernels::{Source, TWIN_AMPERE, TWIN_HOPPER};
use super::runner::Run;
use super::timing::time_runs;

/// A tensor map passed by value (`const __grid_constant__ CUtensorMap`): the driver copies its
/// 128 bytes from the pointer the launch gets.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct TensorMap(sys::CUtensorMap);
// SAFETY: plain bytes, passed by value as the kernel declares it.
unsafe impl DeviceRepr for TensorMap {}

#[derive(Clone, Copy, PartialEq)]
enum Twin {
    Ampere,
    Hopper,
}

impl Twin {
    fn source(self) -> Source {
        match self {
            Twin::Ampere => TWIN_AMPERE,
            Twin::Hopper => TWIN_HOPPER,
        }
    }
    /// (threads, dynamic shared memory, CTA tile m, n, k).
    fn launch(self) -> (u32, u32, u64, u64, u64) {
        match self {
            Twin::Ampere => (256, 75_776, 128, 128, 32),
            Twin::Hopper => (384, 197_696, 128, 256, 64),
        }
    }
    fn design(self) -> &'static str {
        match self {
            Twin::Ampere => {
                "Ampere multistage: cp.async 4 stages, ldmatrix, mma.sync m16n8k16; CTA 128x128x32, 8 warps"
            }
            Twin::Hopper => {
                "Hopper warp-specialised: TMA + mbarriers, 2 consumer warpgroups of wgmma m64n256k16; CTA 128x256x64, 4 stages"
            }
        }
    }
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    let mut skipped = Vec::new();
    for twin in [Twin::Ampere, Twin::Hopper] {
        if !twin.source().runs_on(r.gpu.info.cc) {
            skipped.push(twin.source().path);
            continue;
        }
        for shape in r.plan.twin_shapes.clone() {
            one(r, twin, shape)?;
        }
    }
    if skipped.is_empty() {
        Ok(())
    } else {
        Err(MeasureError::Unsupported(format!(
            "{} not run: compute capability {}.{} (the Hopper twin needs exactly 9.0, the Ampere twin 8.0 or newer)",
            skipped.join(", "),
            r.gpu.info.cc.0,
            r.gpu.info.cc.1
        )))
    }
}

/// A 2D bf16 tensor map over a row-major `rows × cols` matrix with a `box_cols × box_rows` box,
/// 128-byte swizzle: what gemm_wgmma_sm90a.cu asks for.
fn tensor_map(base: u64, rows: u64, cols: u64, box_rows: u32, box_cols: u32) -> Result<TensorMap, MeasureError> {
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    let dims = [cols, rows];
    let strides = [cols * 2];
    let boxes = [box_cols, box_rows];
    let elem = [1u32, 1];
    // SAFETY: every array has the lengths a rank-2 map reads; `base` is a live allocation.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
        .result()
        .map_err(drv("cuTensorMapEncodeTiled"))?;
        Ok(TensorMap(map.assume_init()))
    }
}

struct Set {
    a: CudaSlice<half::bf16>,
    b: CudaSlice<half::bf16>,
    c: CudaSlice<half::bf16>,
    maps: Option<(TensorMap, TensorMap)>,
}

fn launch_one(
    gpu: &Gpu,
    f: &CudaFunction,
    twin: Twin,
    s: &mut Set,
    (m, n, k): (u64, u64, u64),
) -> Result<(), MeasureError> {
    let (threads, smem, tm, tn, _) = twin.launch();
    let cfg = LaunchConfig {
        grid_dim: ((n / tn) as u32, (m / tm) as u32, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem,
    };
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let mut b = gpu.stream.launch_builder(f);
    match (&s.maps, twin) {
        (Some((ma, mb)), Twin::Hopper) => b.arg(ma).arg(mb).arg(&mut s.c).arg(&mi).arg(&ni).arg(&ki),
        _ => b.arg(&s.a).arg(&s.b).arg(&mut s.c).arg(&mi).arg(&ni).arg(&ki),
    };
    // SAFETY: the arguments are the twin's (see its header comment); the shape is whole CTA tiles.
    unsafe { b.launch(cfg) }.map(|_| ()).map_err(drv(format!("launching {}", twin.source().kernels[0])))
}

fn one(r: &mut Run, twin: Twin, (m, n, k): (u64, u64, u64)) -> Result<(), MeasureError> {
    let src = twin.source();
    let name = src.kernels[0];
    let (_, smem, tm, tn, tk) = twin.launch();
    if m % tm != 0 || n % tn != 0 || k % tk != 0 {
        return Err(MeasureError::Usage(format!("{name}: {m}x{n}x{k} is not whole {tm}x{tn}x{tk} tiles")));
    }
    if smem > r.gpu.info.max_smem_optin {
        return Err(MeasureError::Unsupported(format!(
            "{name} needs {smem} B of shared memory per CTA; the device allows {}",
            r.gpu.info.max_smem_optin
        )));
    }
    let f = r.gpu.function(&src, name)?;
    f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
        .map_err(drv(format!("{name}: setting its dynamic shared memory to {smem} B")))?;
    // A: M x K row-major. B: K x N row-major (Ampere) or N x K row-major (Hopper, K-major). C: M x N.
    let set_bytes = 2 * (m * k + k * n + m * n);
    let sets = buffer_sets(set_bytes, r.gpu.info.l2_bytes, r.gpu.info.memory_bytes);
    let mut bufs = Vec::new();
    for s in 0..sets {
        let (sa, sb) = (4000 + 2 * s as u32, 4001 + 2 * s as u32);
        let mut a = alloc::<half::bf16>(&r.gpu, (m * k) as usize, "twin A")?;
        let mut b = alloc::<half::bf16>(&r.gpu, (k * n) as usize, "twin B")?;
        let c = alloc::<half::bf16>(&r.gpu, (m * n) as usize, "twin C")?;
        fill(&mut r.gpu, "fill_bf16", &mut a, sa)?;
        fill(&mut r.gpu, "fill_bf16", &mut b, sb)?;
        let maps = if twin == Twin::Hopper {
            let (pa, _ga) = a.device_ptr(&r.gpu.stream);
            let (pb, _gb) = b.device_ptr(&r.gpu.stream);
            Some((tensor_map(pa, m, k, 128, 64)?, tensor_map(pb, n, k, 256, 64)?))
        } else {
            None
        };
        bufs.push(Set { a, b, c, maps });
    }
    let what = format!("{name} {m}x{n}x{k}");
    launch_one(&r.gpu, &f, twin, &mut bufs[0], (m, n, k))?;
    r.gpu.sync(&what)?;
    let (sa, sb) = (4000, 4001);
    let hopper = twin == Twin::Hopper;
    check_entries(
        &r.gpu,
        &bufs[0].c,
        (m, n, k),
        r.plan.gemm_check_samples,
        |i, j| {
            super::host::gemm_entry(
                round_bf16,
                k,
                |l| i * k + l,
                |l| if hopper { j * k + l } else { l * n + j },
                sa,
                sb,
            )
        },
        |i, j| i * n + j,
        &what,
    )?;
    let nsets = bufs.len();
    let gpu = &r.gpu;
    let t = time_runs(gpu, r.plan.warmups, r.plan.repetitions, |i| {
        launch_one(gpu, &f, twin, &mut bufs[i % nsets], (m, n, k))
    })?;
    let tflops = 2.0 * (m * n * k) as f64 / (t.median_ms * 1e-3) / 1e12;
    let clock = r.case_clock(t.clocks)?;
    // The id names the design (gpusim_workloads::gemm::Twin) that correlate simulates it with.
    let short = if hopper { Design::Hopper } else { Design::Ampere }.short();
    let mut c =
        new_case(format!("gemm-twin-{short}-{m}x{n}x{k}"), Kind::Other("gemm_twin".into()), Metric::Tflops, tflops);
    c.clock_mhz = Some(clock);
    c.dtype = Some("bf16 in, fp32 accumulate, bf16 out".into());
    (c.m, c.n, c.k) = (Some(m), Some(n), Some(k));
    c.layout = Some(if hopper { "row-major A (M x K), B (N x K), C (M x N): TN" } else { "row-major A, B, C" }.into());
    c.implementation = Some(format!("{}: {}", src.path, twin.design()));
    c.source = format!("{} {name}", src.path);
    c.locator = r.locator(&format!("{} {name} {m}x{n}x{k}, {nsets} rotating input set(s)", src.file));
    c.notes = Some(
        "kind gemm_twin: one fixed kernel design (the recipe it matches: workloads/tests/cuda_twins.rs), not cuBLAS"
            .into(),
    );
    r.push(c);
    Ok(())
}
