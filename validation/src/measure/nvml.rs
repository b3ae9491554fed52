//! NVML, opened at run time (`libnvidia-ml.so.1` ships with the driver): the clocks during a run
//! and the driver's version. Optional: without it the harness measures the SM clock itself and
//! says so.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

type Handle = *mut c_void;
type InitFn = unsafe extern "C" fn() -> c_int;
type ByBusFn = unsafe extern "C" fn(*const c_char, *mut Handle) -> c_int;
type ByIndexFn = unsafe extern "C" fn(c_uint, *mut Handle) -> c_int;
type ClockFn = unsafe extern "C" fn(Handle, c_uint, *mut c_uint) -> c_int;
type DriverVersionFn = unsafe extern "C" fn(*mut c_char, c_uint) -> c_int;

const NVML_SUCCESS: c_int = 0;
const NVML_CLOCK_SM: c_uint = 1;
const NVML_CLOCK_MEM: c_uint = 2;

/// An initialised NVML with the handle of our device.
pub struct Nvml {
    // Keeps the library loaded while the function pointers are used.
    _lib: libloading::Library,
    clock: ClockFn,
    device: Handle,
    /// The kernel driver's version ("580.159").
    pub driver_version: Option<String>,
    /// How the device was found (by PCI bus id, or by index when that failed).
    pub matched_by: String,
}

impl Nvml {
    /// Opens NVML and finds the device with PCI bus id `bus_id` (CUDA's), else the one with
    /// index `ordinal`. `Err` says why NVML cannot be used.
    pub fn open(bus_id: &str, ordinal: usize) -> Result<Nvml, String> {
        // SAFETY: loading NVML runs its (driver-supplied) initialisers only.
        let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }
            .or_else(|_| unsafe { libloading::Library::new("libnvidia-ml.so") })
            .map_err(|e| format!("libnvidia-ml.so.1 could not be loaded ({e})"))?;
        // SAFETY: the symbols have these C signatures (nvml.h); the pointers are used while `lib` lives.
        unsafe {
            let init = *lib.get::<InitFn>(b"nvmlInit_v2\0").map_err(|e| e.to_string())?;
            let by_bus = *lib.get::<ByBusFn>(b"nvmlDeviceGetHandleByPciBusId_v2\0").map_err(|e| e.to_string())?;
            let by_index = *lib.get::<ByIndexFn>(b"nvmlDeviceGetHandleByIndex_v2\0").map_err(|e| e.to_string())?;
            let clock = *lib.get::<ClockFn>(b"nvmlDeviceGetClockInfo\0").map_err(|e| e.to_string())?;
            let version = lib.get::<DriverVersionFn>(b"nvmlSystemGetDriverVersion\0").ok().map(|f| *f);
            let r = init();
            if r != NVML_SUCCESS {
                return Err(format!("nvmlInit_v2 returned {r}"));
            }
            let mut device: Handle = std::ptr::null_mut();
            let bus = CString::new(bus_id).map_err(|e| e.to_string())?;
            let matched_by = if by_bus(bus.as_ptr(), &mut device) == NVML_SUCCESS {
                format!("PCI bus id {bus_id}")
            } else {
                let r = by_index(ordinal as c_uint, &mut device);
                if r != NVML_SUCCESS {
                    return Err(format!("NVML found neither PCI bus id {bus_id} nor index {ordinal} ({r})"));
                }
                format!("index {ordinal} (the PCI bus id {bus_id} was not found)")
            };
            let driver_version = version.and_then(|f| {
                let mut buf = [0 as c_char; 96];
                (f(buf.as_mut_ptr(), buf.len() as c_uint) == NVML_SUCCESS)
                    .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
            });
            let n = Nvml { _lib: lib, clock, device, driver_version, matched_by };
            if n.clocks().is_none() {
                return Err("nvmlDeviceGetClockInfo does not answer for this device".into());
            }
            Ok(n)
        }
    }

    /// Current (SM, memory) clocks, MHz.
    pub fn clocks(&self) -> Option<(f64, f64)> {
        let (mut sm, mut mem) = (0 as c_uint, 0 as c_uint);
        // SAFETY: `device` is a handle NVML gave us; each call writes one uint.
        let ok = unsafe {
            (self.clock)(self.device, NVML_CLOCK_SM, &mut sm) == NVML_SUCCESS
                && (self.clock)(self.device, NVML_CLOCK_MEM, &mut mem) == NVML_SUCCESS
        };
        (ok && sm > 0).then_some((sm as f64, mem as f64))
    }
}
