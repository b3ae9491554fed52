//! The shared vocabulary of the validation crate: a measured [`Case`] (its [`Kind`], [`Metric`],
//! [`Trust`]), the GPU and method it was measured with ([`Device`], [`Method`]), and the [`Error`]
//! of reading measurement files. [`crate::reference`] reads these from TOML and
//! [`crate::measurement`] writes them; every other module takes cases from here.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a case measures (`kind`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Latency,
    Bandwidth,
    Peak,
    Gemm,
    Attention,
    Moe,
    SimAccuracy,
    /// A kind this crate does not know yet, kept as written.
    Other(String),
}

impl Kind {
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Latency => "latency",
            Kind::Bandwidth => "bandwidth",
            Kind::Peak => "peak",
            Kind::Gemm => "gemm",
            Kind::Attention => "attention",
            Kind::Moe => "moe",
            Kind::SimAccuracy => "sim_accuracy",
            Kind::Other(s) => s,
        }
    }
}

impl From<String> for Kind {
    fn from(s: String) -> Kind {
        match s.as_str() {
            "latency" => Kind::Latency,
            "bandwidth" => Kind::Bandwidth,
            "peak" => Kind::Peak,
            "gemm" => Kind::Gemm,
            "attention" => Kind::Attention,
            "moe" => Kind::Moe,
            "sim_accuracy" => Kind::SimAccuracy,
            _ => Kind::Other(s),
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        String::deserialize(d).map(Kind::from)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a case can be trusted (`trust`); errors against it are weighted by [`Trust::weight`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    High,
    Medium,
    Low,
}

impl Trust {
    /// Weight of an error against a case of this trust: 1, 0.5, 0.25.
    pub fn weight(self) -> f64 {
        match self {
            Trust::High => 1.0,
            Trust::Medium => 0.5,
            Trust::Low => 0.25,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Trust::High => "high",
            Trust::Medium => "medium",
            Trust::Low => "low",
        }
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The unit of `value` (`metric`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// SM clock cycles.
    Cycles,
    /// 1e9 bytes per second.
    Gbps,
    /// 2^30 bytes per second.
    Gibps,
    /// 1e12 FLOP per second.
    Tflops,
    /// Microseconds.
    Us,
    FlopsPerClkPerSm,
    BytesPerClkPerSm,
    Other(String),
}

impl Metric {
    pub fn as_str(&self) -> &str {
        match self {
            Metric::Cycles => "cycles",
            Metric::Gbps => "gbps",
            Metric::Gibps => "gibps",
            Metric::Tflops => "tflops",
            Metric::Us => "us",
            Metric::FlopsPerClkPerSm => "flops_per_clk_per_sm",
            Metric::BytesPerClkPerSm => "bytes_per_clk_per_sm",
            Metric::Other(s) => s,
        }
    }
}

impl From<String> for Metric {
    fn from(s: String) -> Metric {
        match s.as_str() {
            "cycles" => Metric::Cycles,
            "gbps" => Metric::Gbps,
            "gibps" => Metric::Gibps,
            "tflops" => Metric::Tflops,
            "us" => Metric::Us,
            "flops_per_clk_per_sm" => Metric::FlopsPerClkPerSm,
            "bytes_per_clk_per_sm" => Metric::BytesPerClkPerSm,
            _ => Metric::Other(s),
        }
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        String::deserialize(d).map(Metric::from)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[case]]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Case {
    pub id: String,
    pub kind: Kind,
    /// The part exactly as the source states it ("A100 80GB", "H800 PCIe", ...).
    pub hardware: String,
    /// SM clock during the measurement, where the source states it.
    #[serde(default)]
    pub clock_mhz: Option<f64>,
    pub metric: Metric,
    pub value: f64,
    /// Raw FLOP/s where the source gives them beside the rounded value.
    #[serde(default)]
    pub value_raw_flops_per_s: Option<f64>,

    // Shape fields (which ones a case has depends on its kind).
    /// Memory level or unit measured (`L1`, `L2`, `L2-far`, `DRAM`, `TMA load, DRAM`, ...).
    #[serde(default)]
    pub level: Option<String>,
    /// Data-set size in kB (1024 bytes, as the RRZE benchmarks count).
    #[serde(default)]
    pub footprint_kb: Option<f64>,
    /// Which kernel of a benchmark (`read`, `triad`, `init`).
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub layout: Option<String>,
    #[serde(default)]
    pub m: Option<u64>,
    #[serde(default)]
    pub n: Option<u64>,
    #[serde(default)]
    pub k: Option<u64>,
    #[serde(default)]
    pub batch: Option<u64>,
    #[serde(default)]
    pub heads: Option<u64>,
    #[serde(default)]
    pub seqlen: Option<u64>,
    #[serde(default)]
    pub headdim: Option<u64>,
    #[serde(default)]
    pub causal: Option<bool>,
    /// `fwd`, `bwd`, `fwd_bwd` (attention).
    #[serde(default)]
    pub direction: Option<String>,
    /// The implementation that produced the number (FlashAttention-2, cuBLAS, ...).
    #[serde(default, rename = "impl")]
    pub implementation: Option<String>,
    #[serde(default)]
    pub experts: Option<u64>,
    #[serde(default)]
    pub topk: Option<u64>,
    #[serde(default)]
    pub tokens: Option<u64>,
    #[serde(default)]
    pub tokens_per_expert: Option<u64>,
    #[serde(default)]
    pub hidden: Option<u64>,
    #[serde(default)]
    pub memory_gbps: Option<f64>,

    // Provenance.
    pub source: String,
    pub locator: String,
    pub how_read: String,
    pub trust: Trust,
    #[serde(default)]
    pub notes: Option<String>,

    /// The GPU and its clocks during the measurement: the case's own `[case.device]`, else the
    /// file's `[device]` (measurement files; `None` for published figures).
    #[serde(default)]
    pub device: Option<Device>,
    /// How the number was measured: the case's own `[case.method]`, else the file's `[method]`.
    #[serde(default)]
    pub method: Option<Method>,

    /// Fields the schema above does not name, as written.
    #[serde(flatten)]
    pub extra: BTreeMap<String, toml::Value>,

    /// File the case was read from (set by [`crate::reference::load_cases`]).
    #[serde(skip)]
    pub file: PathBuf,
    /// Line of its `[[case]]` header (1-based; set by [`crate::reference::load_cases`]).
    #[serde(skip)]
    pub line: usize,
}

impl Case {
    /// A case with its identity and value and every optional field empty: `trust` high,
    /// `hardware`, `source`, `locator` and `how_read` empty for the caller to set. For readers of
    /// other formats (measurement files, Nsight Compute exports).
    pub fn new(id: impl Into<String>, kind: Kind, metric: Metric, value: f64) -> Case {
        Case {
            id: id.into(),
            kind,
            hardware: String::new(),
            clock_mhz: None,
            metric,
            value,
            value_raw_flops_per_s: None,
            level: None,
            footprint_kb: None,
            kernel: None,
            dtype: None,
            layout: None,
            m: None,
            n: None,
            k: None,
            batch: None,
            heads: None,
            seqlen: None,
            headdim: None,
            causal: None,
            direction: None,
            implementation: None,
            experts: None,
            topk: None,
            tokens: None,
            tokens_per_expert: None,
            hidden: None,
            memory_gbps: None,
            source: String::new(),
            locator: String::new(),
            how_read: String::new(),
            trust: Trust::High,
            notes: None,
            device: None,
            method: None,
            extra: BTreeMap::new(),
            file: PathBuf::new(),
            line: 0,
        }
    }

    /// `file:line` of the case's `[[case]]` header.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// The footprint in bytes (`footprint_kb · 1024`).
    pub fn footprint_bytes(&self) -> Option<u64> {
        self.footprint_kb.map(|kb| (kb * 1024.0).round() as u64)
    }
}

/// Why reference data could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: cannot read: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{col}: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, col: usize, message: String },
    #[error("{}:{line}: case #{index}{}: {message}", path.display(), id.as_ref().map(|i| format!(" `{i}`")).unwrap_or_default())]
    Case { path: PathBuf, line: usize, index: usize, id: Option<String>, message: String },
}

/// The GPU a file's numbers were measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// As the driver names it ("NVIDIA H200", "NVIDIA H100 80GB HBM3", ...).
    pub name: String,
    pub sm_count: u32,
    /// SM clock during the run, MHz; `clock_source` says how it was read.
    pub sm_clock_mhz: f64,
    /// Memory clock during the run, MHz (as the driver states it; HBM data rate is twice it).
    pub memory_clock_mhz: f64,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    /// `major.minor`.
    pub compute_capability: String,
    /// The kernel driver's version (NVML), else the CUDA driver API version.
    pub driver_version: String,
    /// The CUDA libraries used: driver API, NVRTC, cuBLAS versions.
    pub cuda_version: String,
    /// The largest SM clock the device reports, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_max_mhz: Option<f64>,
    /// The largest memory clock the device reports, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_max_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_width_bits: Option<u32>,
    /// How `sm_clock_mhz` and `memory_clock_mhz` were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl Device {
    /// The part as the reference data and the preset tables name it ([`hardware_for`]).
    pub fn hardware(&self) -> String {
        hardware_for(&self.name, self.sm_count)
    }
}

/// How a file's (or a case's) numbers were taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Method {
    /// Untimed runs before the timed ones.
    pub warmups: u32,
    /// Timed runs the statistic is taken over.
    pub repetitions: u32,
    /// `median`, `mean`, `min`, ...
    pub statistic: String,
    /// Whether the inputs were random (never all zeros: zero operands run faster).
    pub random_inputs: bool,
    /// What timed the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<String>,
    /// How repeated runs were kept from measuring the L2 (rotating input buffers, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<String>,
    /// How the results were checked before timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// The part as the reference data names it, from the driver's device name and SM count: the
/// names that `gpusim_configs::ALIASES`
/// maps to presets ("H200 SXM", "H100 SXM", "H100 PCIe", "H800 SXM5", "H800 PCIe", "A100 80GB",
/// "A100 PCIe"). A part no preset models (H100 NVL, GH200, A100 40GB SXM4, A100 80GB PCIe, ...) keeps
/// the driver's name.
pub fn hardware_for(device_name: &str, sm_count: u32) -> String {
    let n = device_name.to_ascii_lowercase();
    let has = |s: &str| n.contains(s);
    // GH200 (Grace Hopper) modules differ in memory from both SXM parts: not matched.
    let named = if has("gh200") || has("gh100") {
        None
    } else if has("h200") && !has("nvl") {
        Some("H200 SXM")
    } else if has("h100") && has("pcie") {
        Some("H100 PCIe")
    } else if has("h100") && !has("nvl") && sm_count == 132 {
        Some("H100 SXM")
    } else if has("h800") && has("pcie") {
        Some("H800 PCIe")
    } else if has("h800") && sm_count == 132 {
        Some("H800 SXM5")
    } else if has("a100") && has("pcie") && has("40gb") {
        Some("A100 PCIe")
    } else if has("a100") && has("sxm") && has("80gb") {
        Some("A100 80GB")
    } else {
        None
    };
    named.map_or_else(|| device_name.trim().to_string(), str::to_string)
}

// ---------------------------------------------------------------------------------------------
// Writing

// Pointer-chase footprints: the harness measures at these and the memory cases simulate them.

/// Footprint of the L1 latency chase: well inside every L1 (A100: 192 KiB less the carveout).
pub const L1_CHASE_FOOTPRINT: u64 = 32 << 10;
/// Footprint of the near-L2 latency chase: above every L1, below half of every L2.
pub const L2_CHASE_FOOTPRINT: u64 = 4 << 20;
/// Footprint of the far-L2 chase on A100 (RRZE's far plateau is 25–31 MB; the near partition
/// holds 20 MiB).
pub const L2_FAR_CHASE_FOOTPRINT: u64 = 28 << 20;
/// DRAM chase footprint when the source does not state one.
pub const DEFAULT_DRAM_CHASE_FOOTPRINT: u64 = 256 << 20;
