//! The order of a run, the cases' common fields, the file's `[device]` and `[method]`.

use crate::case::Case;
use crate::measurement::{Device, Measurements, Method, hardware_for};

use super::gpu::{Gpu, check_cublas};
use super::host::median;
use super::suite::{GROUPS, Plan};
use super::{MeasureError, Options, Outcome, chase, gemm, gemm_fp8, l2, mma, smem, stream, twins, wgmma};

/// A run in progress: the device, the plan, the cases so far.
pub struct Run<'a> {
    pub gpu: Gpu,
    pub plan: Plan,
    progress: &'a mut dyn FnMut(&str),
    pub cases: Vec<Case>,
    /// SM and memory clock samples (MHz) of the cases, for the file's `[device]`.
    pub sm_clocks: Vec<f64>,
    pub mem_clocks: Vec<f64>,
    pub cublas_version: Option<String>,
    pub cublaslt_version: Option<String>,
}

impl Run<'_> {
    pub fn say(&mut self, line: &str) {
        (self.progress)(line);
    }

    /// `suite quick; file kernel; detail`.
    pub fn locator(&self, what: &str) -> String {
        format!("suite {}; {what}", self.plan.suite.as_str())
    }

    /// The SM clock for a case: NVML's sample taken during its runs if any, else the clock now
    /// (NVML, or measured).
    pub fn case_clock(&mut self, during: Option<(f64, f64)>) -> Result<f64, MeasureError> {
        let (sm, mem) = match during.or_else(|| self.gpu.nvml_clocks()) {
            Some(c) => c,
            None => (self.gpu.measure_sm_clock()?, self.gpu.info.memory_clock_max_mhz),
        };
        self.sm_clocks.push(sm);
        self.mem_clocks.push(mem);
        Ok(sm)
    }

    pub fn push(&mut self, case: Case) {
        let line = format!("  {} = {:.4} {}", case.id, case.value, case.metric);
        self.say(&line);
        self.cases.push(case);
    }
}

/// The method of the event-timed cases (the file's `[method]`).
fn file_method(plan: &Plan) -> Method {
    Method {
        warmups: plan.warmups,
        repetitions: plan.repetitions,
        statistic: "median".into(),
        random_inputs: true,
        timer: Some(
            "CUDA events created with CU_EVENT_DEFAULT, one pair around each repetition, repetitions launched back to back"
                .into(),
        ),
        buffers: Some(
            "GEMM inputs rotate over buffer sets whose total exceeds twice the L2; STREAM arrays are several times the L2"
                .into(),
        ),
        check: Some(
            "before timing: GEMM entries against a CPU product of the same inputs, STREAM/L2/shared-memory results \
             exactly against the host's replay of the kernels"
                .into(),
        ),
        notes: Some(
            "inputs are device-side random fills (validation/cuda/util.cu) in [-1, 1), never zeros; cases timed \
             otherwise carry their own [case.method]"
                .into(),
        ),
    }
}

/// The method of cases timed with clock64 inside the kernel.
pub fn clock64_method(runs: u32, what: &str, check: &str) -> Method {
    Method {
        warmups: 1,
        repetitions: runs,
        statistic: "median".into(),
        random_inputs: true,
        timer: Some(format!("clock64 inside the kernel ({what})")),
        buffers: None,
        check: Some(check.into()),
        notes: None,
    }
}

pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Outcome, MeasureError> {
    let gpu = Gpu::open(opts.device)?;
    let plan = Plan::new(opts.suite);
    let mut r = Run {
        gpu,
        plan,
        progress,
        cases: Vec::new(),
        sm_clocks: Vec::new(),
        mem_clocks: Vec::new(),
        cublas_version: None,
        cublaslt_version: None,
    };
    let i = r.gpu.info.clone();
    r.say(&format!(
        "device {}: {} (sm_{}{}), {} SMs, L2 {} MiB, {} GiB, max clocks SM {} MHz / memory {} MHz, driver API {}, NVRTC {}",
        opts.device,
        i.name,
        i.cc.0,
        i.cc.1,
        i.sms,
        i.l2_bytes >> 20,
        i.memory_bytes >> 30,
        i.sm_clock_max_mhz,
        i.memory_clock_max_mhz,
        i.driver_api,
        r.gpu.nvrtc_version
    ));
    match (&r.gpu.nvml, &r.gpu.nvml_missing) {
        (Some(n), _) => {
            let line = format!("NVML: clocks sampled during the runs (device matched by {})", n.matched_by);
            r.say(&line)
        }
        (None, why) => {
            let line = format!(
                "NVML not used ({}): the SM clock is measured with clock64 against the global timer",
                why.as_deref().unwrap_or("?")
            );
            r.say(&line)
        }
    }

    let mut failures: Vec<(String, MeasureError)> = Vec::new();
    for group in GROUPS {
        if !opts.only.is_empty() && !opts.only.iter().any(|g| g == group) {
            continue;
        }
        r.say(&format!("== {group}"));
        let res = match group {
            "chase" => chase::run(&mut r),
            "stream" => stream::run(&mut r),
            "l2" => l2::run(&mut r),
            "smem" => smem::run(&mut r),
            "mma" => mma::run(&mut r),
            "wgmma" => wgmma::run(&mut r).and_then(|()| wgmma::run_overlap(&mut r)),
            "gemm" => check_cublas().and_then(|()| gemm::run(&mut r)),
            // Checks the device, then libcublasLt, itself: an older device is skipped either way.
            "gemm-fp8" => gemm_fp8::run(&mut r),
            "twins" => twins::run(&mut r),
            _ => Ok(()),
        };
        if let Err(e) = res {
            let line = format!("  {group}: {e}");
            r.say(&line);
            // A fault leaves the context unusable: later groups would only repeat it.
            let sticky = matches!(&e, MeasureError::Driver { message, .. } if is_sticky(message));
            failures.push((group.to_string(), e));
            if sticky {
                failures.push((
                    "(the groups after it)".into(),
                    MeasureError::Driver {
                        what: "not run".into(),
                        message: "the CUDA context is unusable after that error".into(),
                    },
                ));
                break;
            }
        }
    }

    let i = &r.gpu.info;
    let nvml_driver = r.gpu.nvml.as_ref().and_then(|n| n.driver_version.clone());
    let clock_source = if r.gpu.nvml.is_some() {
        "NVML current clocks (nvmlDeviceGetClockInfo) sampled while each measurement's timed runs ran; each case's \
         clock_mhz is its own sample, the device's the median of them"
            .to_string()
    } else {
        format!(
            "NVML not available ({}): SM clock measured with clock64 against %globaltimer in a 20 ms spin kernel on \
             every SM right after each measurement (light load: under heavy tensor load the clock may be lower); \
             memory clock = the driver's maximum (CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE), not a measurement",
            r.gpu.nvml_missing.as_deref().unwrap_or("?")
        )
    };
    let sm_clock = if r.sm_clocks.is_empty() { i.sm_clock_max_mhz } else { median(&r.sm_clocks) };
    let mem_clock = if r.mem_clocks.is_empty() { i.memory_clock_max_mhz } else { median(&r.mem_clocks) };
    let device = Device {
        name: i.name.clone(),
        sm_count: i.sms,
        sm_clock_mhz: sm_clock,
        memory_clock_mhz: mem_clock,
        l2_bytes: i.l2_bytes,
        memory_bytes: i.memory_bytes,
        compute_capability: format!("{}.{}", i.cc.0, i.cc.1),
        driver_version: nvml_driver.unwrap_or_else(|| format!("CUDA driver API {}", i.driver_api)),
        cuda_version: format!(
            "driver API {}; NVRTC {}; cuBLAS {}{}",
            i.driver_api,
            r.gpu.nvrtc_version,
            r.cublas_version.as_deref().unwrap_or("not used"),
            r.cublaslt_version.as_deref().map(|v| format!("; cuBLASLt {v}")).unwrap_or_default()
        ),
        sm_clock_max_mhz: (i.sm_clock_max_mhz > 0.0).then_some(i.sm_clock_max_mhz),
        memory_clock_max_mhz: (i.memory_clock_max_mhz > 0.0).then_some(i.memory_clock_max_mhz),
        memory_bus_width_bits: (i.bus_width_bits > 0).then_some(i.bus_width_bits),
        clock_source: Some(clock_source),
        notes: Some(format!("PCI bus id {}; CUDA device {}", i.pci_bus_id, opts.device)),
    };
    let hardware = hardware_for(&i.name, i.sms);
    let source = format!("gpusim {} measure, suite {}", opts.version, opts.suite.as_str());
    let mut cases = std::mem::take(&mut r.cases);
    for c in &mut cases {
        c.hardware.clone_from(&hardware);
        c.source = format!("{source}: {}", c.source);
    }
    let mut header = vec![
        format!("Measured with gpusim {} (`gpusim measure --suite {}`).", opts.version, opts.suite.as_str()),
        format!(
            "{} ({} SMs, compute capability {}.{}), hardware = \"{hardware}\"; schema: validation/src/measurement.rs.",
            i.name, i.sms, i.cc.0, i.cc.1
        ),
    ];
    for (g, e) in &failures {
        header.push(format!("not measured: {g}: {e}"));
    }
    let method = file_method(&r.plan);
    Ok(Outcome { measurements: Measurements { device: Some(device), method: Some(method), cases }, failures, header })
}

/// Errors after which the context cannot be used again.
fn is_sticky(message: &str) -> bool {
    [
        "ILLEGAL_ADDRESS",
        "ILLEGAL_INSTRUCTION",
        "MISALIGNED_ADDRESS",
        "INVALID_ADDRESS_SPACE",
        "INVALID_PC",
        "LAUNCH_FAILED",
        "HARDWARE_STACK_ERROR",
        "ASSERT",
        "LAUNCH_TIMEOUT",
    ]
    .iter()
    .any(|s| message.contains(s))
}
