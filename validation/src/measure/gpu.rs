//! The device: library checks, context and stream, device facts, compiled kernels, clocks.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::driver::result::DriverError;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg, sys};
use cudarc::nvrtc::Ptx;

use super::MeasureError;
use super::compile;
use super::host::median;
use super::kernels::{self, Source};
use super::nvml::Nvml;

/// `CUDA_ERROR_...: text` of a driver error.
pub fn describe(e: DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name}: {text}")
}

/// A driver error as a [`MeasureError`], saying what was being done.
pub fn drv(what: impl Into<String>) -> impl FnOnce(DriverError) -> MeasureError {
    let what = what.into();
    move |e| MeasureError::Driver { what, message: describe(e) }
}

/// Names the loader tries for a library (cudarc's list), for error messages.
fn tried(lib: &str) -> String {
    let c = cudarc::get_lib_name_candidates(lib);
    let mut shown: Vec<String> = c.into_iter().filter(|n| !n.contains("64_")).collect();
    shown.dedup();
    shown.join(", ")
}

/// The driver library can be opened: else [`MeasureError::MissingLibrary`].
pub fn check_driver() -> Result<(), MeasureError> {
    // SAFETY: only tries to open the library (dlopen), which has no other effect.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(MeasureError::MissingLibrary {
            library: "the NVIDIA driver (libcuda.so)",
            tried: tried("cuda"),
            hint: "`gpusim measure` needs a machine with an NVIDIA GPU and its driver installed".into(),
        })
    }
}

/// NVRTC can be opened.
pub fn check_nvrtc() -> Result<(), MeasureError> {
    // SAFETY: as above.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(MeasureError::MissingLibrary {
            library: "NVRTC (libnvrtc.so.13)",
            tried: tried("nvrtc"),
            hint: "install the CUDA 13 NVRTC (`pip install --target DIR nvidia-cuda-nvrtc`) and put its lib folder on \
                   LD_LIBRARY_PATH; scripts/measure-on-gpu.sh does both"
                .into(),
        })
    }
}

/// cuBLAS can be opened.
pub fn check_cublas() -> Result<(), MeasureError> {
    // SAFETY: as above.
    if unsafe { cudarc::cublas::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(MeasureError::MissingLibrary {
            library: "cuBLAS (libcublas.so.13)",
            tried: tried("cublas"),
            hint: "install the CUDA 13 cuBLAS (`pip install --target DIR nvidia-cublas`) and put its lib folder on \
                   LD_LIBRARY_PATH; scripts/measure-on-gpu.sh does both"
                .into(),
        })
    }
}

/// cuBLASLt can be opened. It ships with cuBLAS (same wheel, same folder), but is its own library
/// that cudarc opens separately, and panics on if it is missing: check before the first call.
pub fn check_cublaslt() -> Result<(), MeasureError> {
    // SAFETY: as above.
    if unsafe { cudarc::cublaslt::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(MeasureError::MissingLibrary {
            library: "cuBLASLt (libcublasLt.so.13)",
            tried: tried("cublasLt"),
            hint:
                "it comes with the CUDA 13 cuBLAS (`pip install --target DIR nvidia-cublas` installs both into one lib \
                   folder): put that folder on LD_LIBRARY_PATH; scripts/measure-on-gpu.sh does both"
                    .into(),
        })
    }
}

/// What the driver says about the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub cc: (u32, u32),
    pub sms: u32,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    pub sm_clock_max_mhz: f64,
    pub memory_clock_max_mhz: f64,
    pub bus_width_bits: u32,
    /// `cuDriverGetVersion`, as "13.0".
    pub driver_api: String,
    pub pci_bus_id: String,
    pub max_smem_optin: u32,
}

/// An open device with its stream and the kernels compiled so far.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    pub nvml: Option<Nvml>,
    /// Why NVML is not used, when it is not.
    pub nvml_missing: Option<String>,
    pub nvrtc_version: String,
    modules: BTreeMap<&'static str, Arc<CudaModule>>,
}

fn attr(ctx: &CudaContext, a: sys::CUdevice_attribute) -> Result<i32, MeasureError> {
    ctx.attribute(a).map_err(drv(format!("cuDeviceGetAttribute({a:?})")))
}

impl Gpu {
    /// Checks the driver and NVRTC, opens device `ordinal`, reads its facts.
    pub fn open(ordinal: usize) -> Result<Gpu, MeasureError> {
        check_driver()?;
        let count = CudaContext::device_count()
            .map_err(|e| MeasureError::NoDevice(format!("the driver found no device ({})", describe(e))))?;
        if count <= 0 {
            return Err(MeasureError::NoDevice("the driver reports no CUDA device".into()));
        }
        if ordinal >= count as usize {
            return Err(MeasureError::NoDevice(format!(
                "device {ordinal} does not exist: the driver reports {count} device(s) (0..{})",
                count - 1
            )));
        }
        check_nvrtc()?;
        let ctx = CudaContext::new(ordinal).map_err(drv(format!("creating a context on device {ordinal}")))?;
        // One stream only: no cross-stream events around every launch and allocation.
        // SAFETY: nothing here uses a second stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        use sys::CUdevice_attribute as A;
        let (major, minor) = ctx.compute_capability().map_err(drv("cuDeviceGetAttribute(compute capability)"))?;
        let mut version = 0i32;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(drv("cuDriverGetVersion"))?;
        let mut bus = [0 as std::ffi::c_char; 32];
        // SAFETY: the buffer is 32 bytes, as passed.
        unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, ctx.cu_device()) }
            .result()
            .map_err(drv("cuDeviceGetPCIBusId"))?;
        // SAFETY: the driver wrote a NUL-terminated string into the buffer.
        let pci_bus_id = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
        let info = DeviceInfo {
            name: ctx.name().map_err(drv("cuDeviceGetName"))?,
            cc: (major as u32, minor as u32),
            sms: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2_bytes: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            memory_bytes: ctx.total_mem().map_err(drv("cuDeviceTotalMem"))? as u64,
            // Deprecated attributes (CUDA 13 still answers them): 0 where a driver does not.
            sm_clock_max_mhz: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).unwrap_or(0) as f64 / 1e3,
            memory_clock_max_mhz: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0) as f64 / 1e3,
            bus_width_bits: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).unwrap_or(0) as u32,
            driver_api: format!("{}.{}", version / 1000, (version % 1000) / 10),
            pci_bus_id,
            max_smem_optin: attr(&ctx, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32,
        };
        let (nvml, nvml_missing) = match Nvml::open(&info.pci_bus_id, ordinal) {
            Ok(n) => (Some(n), None),
            Err(why) => (None, Some(why)),
        };
        let nvrtc_version = compile::nvrtc_version().unwrap_or_else(|e| format!("unknown ({e})"));
        Ok(Gpu { ctx, stream, info, nvml, nvml_missing, nvrtc_version, modules: BTreeMap::new() })
    }

    /// Kernel `name` of `src`, compiling and loading the source on first use.
    pub fn function(&mut self, src: &Source, name: &str) -> Result<CudaFunction, MeasureError> {
        if !src.runs_on(self.info.cc) {
            return Err(MeasureError::Unsupported(format!(
                "{} needs compute capability {}.{}{} (this device: {}.{})",
                src.path,
                src.min_cc.0,
                src.min_cc.1,
                if src.arch_specific { " exactly (architecture-specific sm_XYa features)" } else { " or newer" },
                self.info.cc.0,
                self.info.cc.1
            )));
        }
        if !self.modules.contains_key(src.file) {
            let arch = kernels::arch_for(self.info.cc, src.arch_specific);
            let cubin = compile::cubin(src, &arch)?;
            let module = self
                .ctx
                .load_module(Ptx::from_binary(cubin))
                .map_err(drv(format!("loading the {arch} cubin of {}", src.path)))?;
            self.modules.insert(src.file, module);
        }
        self.modules[src.file].load_function(name).map_err(drv(format!("{}: kernel {name}", src.path)))
    }

    pub fn sync(&self, what: &str) -> Result<(), MeasureError> {
        self.stream.synchronize().map_err(drv(format!("{what} (synchronize)")))
    }

    /// NVML's current (SM, memory) clocks in MHz, if NVML is there.
    pub fn nvml_clocks(&self) -> Option<(f64, f64)> {
        self.nvml.as_ref().and_then(|n| n.clocks())
    }

    /// The SM clock measured by the `sm_clock` kernel, MHz.
    pub fn measure_sm_clock(&mut self) -> Result<f64, MeasureError> {
        let f = self.function(&kernels::UTIL, "sm_clock")?;
        let ctas = self.info.sms as usize;
        let mut out = self.stream.alloc_zeros::<u64>(2 * ctas).map_err(drv("allocating 2 words per SM"))?;
        let spin_ns: u64 = 20_000_000;
        let cfg = LaunchConfig { grid_dim: (ctas as u32, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: sm_clock(u64* out, u64 spin_ns) writes 2 words per CTA into `out`.
        unsafe { self.stream.launch_builder(&f).arg(&mut out).arg(&spin_ns).launch(cfg) }
            .map_err(drv("launching sm_clock"))?;
        let v = self.stream.clone_dtoh(&out).map_err(drv("reading sm_clock's result"))?;
        let mhz: Vec<f64> = v.chunks(2).filter(|c| c[1] > 0).map(|c| c[0] as f64 / c[1] as f64 * 1e3).collect();
        let m = median(&mhz);
        if !(m.is_finite() && m > 0.0) {
            return Err(MeasureError::Check { what: "sm_clock".into(), detail: format!("clock readings {v:?}") });
        }
        Ok(m)
    }
}

/// Fills a device buffer of `n` elements with `fill_<kind>` (validation/cuda/util.cu) and `seed`.
pub fn fill<T>(
    gpu: &mut Gpu,
    kernel: &str,
    buf: &mut cudarc::driver::CudaSlice<T>,
    seed: u32,
) -> Result<(), MeasureError> {
    let f = gpu.function(&kernels::UTIL, kernel)?;
    let n = buf.len() as u64;
    let cfg = LaunchConfig { grid_dim: (4 * gpu.info.sms, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: fill_*(T* p, u64 n, u32 seed) writes the n elements of `buf`.
    unsafe { gpu.stream.launch_builder(&f).arg(buf).arg(&n).arg(&seed).launch(cfg) }
        .map_err(drv(format!("launching {kernel}")))?;
    Ok(())
}

/// Allocates `n` elements (contents unset: the caller fills them).
pub fn alloc<T: cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    n: usize,
    what: &str,
) -> Result<cudarc::driver::CudaSlice<T>, MeasureError> {
    // SAFETY: the memory is written (fill, init kernels) before anything reads it.
    unsafe { gpu.stream.alloc::<T>(n) }.map_err(drv(format!("allocating {what} ({} MiB)", (n * size_of::<T>()) >> 20)))
}
