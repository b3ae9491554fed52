//! Nsight Compute CSV exports as measurements: one [`NcuKernel`] per profiled kernel launch,
//! and [`to_cases`] to turn them into reference [`Case`]s of kind `kernel` (metric `us`).
//!
//! Two layouts are read, told apart by their header:
//!
//! - **raw page** (`ncu --csv --page raw --metrics gpu__time_duration.sum,...`): one row per
//!   launch, the identity columns `"ID","Process ID","Process Name","Host Name","Kernel Name",
//!   "Context","Stream","Block Size","Grid Size","Device","CC"`, then one column per metric.
//!   The row after the header may hold the units (its `ID` is empty); without it every value
//!   is taken in its metric's base unit (ncu's `--print-units base`: nanoseconds, cycles,
//!   cycles per second).
//! - **details page** (`ncu --csv`, the default): the identity columns, then `"Section Name",
//!   "Metric Name","Metric Unit","Metric Value"` (and, in newer versions, the rule columns),
//!   one row per metric of a launch. Rows without a metric name (rule results) are skipped.
//!   A launch's rows need not be adjacent; when a metric appears twice the first row wins.
//!
//! Per launch the reader takes:
//!
//! - duration, from the first of [`DURATION_METRICS`] with a value (required);
//! - elapsed SM cycles, from [`CYCLE_METRICS`] (optional);
//! - the SM clock, from [`SM_CLOCK_METRICS`], else derived as cycles / duration;
//! - the DRAM clock, from [`DRAM_CLOCK_METRICS`];
//! - the device name, from `device__attribute_display_name` (exported by the raw page with the
//!   default sections), else the `Device` column when it is not a bare index. ncu writes the
//!   device *index* (`0`) in that column, so a details-page export usually does not name the
//!   GPU: pass the name to [`to_cases`].
//!
//! Every other metric is kept as written in [`NcuKernel::metrics`].
//!
//! Input around the table is tolerated: lines before the header (ncu's `==PROF==` messages, the
//! application's output), `==PROF==` lines after it, blank lines, a UTF-8 byte order mark, a
//! trailing comma. Values may carry thousands separators (`1,234.5`); `n/a` is "not collected".
//!
//! Errors ([`NcuError`]) name the file, the line of the CSV record and the column or metric;
//! malformed input (a wrong number of fields, a missing `ID`/`Kernel Name`/duration, a value
//! that is not a number, an unknown unit, a negative or zero duration) is an error, never a
//! panic and never a silently dropped launch.

mod layout;
pub mod number;
mod table;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::case::{Case, Kind, Metric};
use crate::kernel_cases::{EXTRA_BLOCK, EXTRA_GRID, EXTRA_KERNEL_NAME, EXTRA_NCU_ID, EXTRA_SM_CYCLES, KERNEL_KIND};

/// Metrics giving a launch's duration, in order of preference (raw name, then the details
/// page's name).
pub const DURATION_METRICS: &[&str] =
    &["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration.max", "Duration"];
/// Metrics giving a launch's elapsed SM cycles, in order of preference.
pub const CYCLE_METRICS: &[&str] = &[
    "sm__cycles_elapsed.avg",
    "sm__cycles_elapsed.max",
    "smsp__cycles_elapsed.avg",
    "gpc__cycles_elapsed.max",
    "Elapsed Cycles",
];
/// Metrics giving the SM clock during a launch, in order of preference.
pub const SM_CLOCK_METRICS: &[&str] = &[
    "SM Frequency",
    "smsp__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg.per_second",
    "gpc__cycles_elapsed.avg.per_second",
];
/// Metrics giving the DRAM clock during a launch, in order of preference.
pub const DRAM_CLOCK_METRICS: &[&str] = &["DRAM Frequency", "dram__cycles_elapsed.avg.per_second"];
/// The metric naming the GPU (`NVIDIA H100 80GB HBM3`).
pub const DEVICE_NAME_METRIC: &str = "device__attribute_display_name";

/// Why an ncu CSV could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NcuError {
    #[error("{}: cannot read: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Malformed input: `line` is the line the CSV record starts on (1-based), `field` the
    /// column or metric at fault.
    #[error("{}:{line}: `{field}`: {message}", path.display())]
    Input { path: PathBuf, line: usize, field: String, message: String },
}

impl NcuError {
    pub(crate) fn input(path: &Path, line: usize, field: impl Into<String>, message: impl Into<String>) -> NcuError {
        NcuError::Input { path: path.to_path_buf(), line, field: field.into(), message: message.into() }
    }

    /// The line at fault (0 for an I/O error).
    pub fn line(&self) -> usize {
        match self {
            NcuError::Io { .. } => 0,
            NcuError::Input { line, .. } => *line,
        }
    }

    /// The column or metric at fault.
    pub fn field(&self) -> Option<&str> {
        match self {
            NcuError::Io { .. } => None,
            NcuError::Input { field, .. } => Some(field),
        }
    }
}

/// Which page of ncu's CSV output a launch was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NcuLayout {
    /// `--page raw`: one row per launch; `units_row` when the second row held the units.
    Raw { units_row: bool },
    /// `--page details` (the default): one row per metric.
    Details,
}

impl fmt::Display for NcuLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NcuLayout::Raw { units_row: true } => f.write_str("raw page"),
            NcuLayout::Raw { units_row: false } => f.write_str("raw page without units"),
            NcuLayout::Details => f.write_str("details page"),
        }
    }
}

/// One metric value as written.
#[derive(Clone, Debug, PartialEq)]
pub struct NcuMetric {
    pub value: String,
    /// The unit as written (`nsecond`, `cycle/nsecond`, `%`, ...); `None` in a raw export
    /// without a units row.
    pub unit: Option<String>,
    /// Line of the record holding it.
    pub line: usize,
}

/// Where a launch's SM clock came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// Measured by this metric.
    Metric(String),
    /// Elapsed SM cycles / duration.
    Derived,
}

impl fmt::Display for ClockSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockSource::Metric(m) => f.write_str(m),
            ClockSource::Derived => f.write_str("elapsed cycles / duration"),
        }
    }
}

/// One profiled kernel launch.
#[derive(Clone, Debug, PartialEq)]
pub struct NcuKernel {
    /// `ID`: ncu's number of the result (0-based, in profiling order).
    pub id: u64,
    /// `Kernel Name`, as written (demangled by default: `void cutlass::Kernel2<...>(Params)`).
    pub name: String,
    /// `Grid Size`, in blocks.
    pub grid: Option<[u32; 3]>,
    /// `Block Size`, in threads.
    pub block: Option<[u32; 3]>,
    /// `Device` as written; ncu writes the device index (`0`).
    pub device: Option<String>,
    /// The GPU's name: [`DEVICE_NAME_METRIC`], else `Device` when it is not a bare index.
    pub device_name: Option<String>,
    /// `CC`, the compute capability (`9.0`).
    pub cc: Option<String>,
    pub process_id: Option<String>,
    pub process_name: Option<String>,
    pub host_name: Option<String>,
    pub context: Option<String>,
    pub stream: Option<String>,
    /// Duration of the launch, µs (> 0).
    pub duration_us: f64,
    /// Which metric the duration came from.
    pub duration_metric: String,
    /// Elapsed SM cycles (> 0).
    pub sm_cycles: Option<f64>,
    /// SM clock during the launch, MHz (> 0): measured, else cycles / duration.
    pub sm_clock_mhz: Option<f64>,
    pub sm_clock_from: Option<ClockSource>,
    /// DRAM clock during the launch, MHz (> 0).
    pub dram_clock_mhz: Option<f64>,
    /// Every metric of the launch by name, as written (the ones above included).
    pub metrics: BTreeMap<String, NcuMetric>,
    pub layout: NcuLayout,
    /// Line of the launch's (first) record.
    pub line: usize,
}

/// Parses an ncu CSV export held in memory; `path` names it in errors.
pub fn parse_ncu_csv(path: &Path, text: &str) -> Result<Vec<NcuKernel>, NcuError> {
    let t = table::read_table(path, text)?;
    if t.column("Metric Name").is_some() || t.column("Metric Value").is_some() {
        layout::details(path, &t)
    } else {
        layout::raw(path, &t)
    }
}

/// Reads an ncu CSV export (either layout; see the module documentation). Bytes that are not
/// UTF-8 are replaced (they can only occur in names).
pub fn load_ncu_csv(path: &Path) -> Result<Vec<NcuKernel>, NcuError> {
    let bytes = std::fs::read(path).map_err(|source| NcuError::Io { path: path.to_path_buf(), source })?;
    parse_ncu_csv(path, &String::from_utf8_lossy(&bytes))
}

fn dim_value(d: [u32; 3]) -> toml::Value {
    toml::Value::Array(d.iter().map(|&v| toml::Value::Integer(i64::from(v))).collect())
}

/// The reference cases of `kernels`, read from `path`: one per launch, kind `kernel`, metric
/// `us`, value = the duration.
///
/// - `id` = `<file stem>-<ID>`; `source` = the file name; `locator` = `ID <n>, <kernel name>`;
///   `how_read` = `Nsight Compute CSV`; `trust` = high; `file`/`line` = the CSV and the launch's
///   record, so [`Case::location`] points at it.
/// - `hardware` = `hardware` when given, else the launch's [`NcuKernel::device_name`], else
///   `GPU <Device> (CC <cc>), name not exported`.
/// - `clock_mhz` = the launch's SM clock.
/// - `extra`: `kernel_name`, `ncu_id`, `grid` and `block` (`[x, y, z]`), `sm_cycles`, and where
///   known `cc`, `device`, `sm_clock_from`, `dram_clock_mhz`, `duration_metric`, `ncu_layout`.
///   Add `trace` (and `trace_kernel`) to simulate the case ([`crate::kernel_cases`],
///   [`crate::kernel_cases::attach_traces`]).
pub fn to_cases(path: &Path, kernels: &[NcuKernel], hardware: Option<&str>) -> Vec<Case> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "ncu".into());
    let source = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| stem.clone());
    kernels
        .iter()
        .map(|k| {
            let mut extra = BTreeMap::new();
            let s = |v: &str| toml::Value::String(v.to_string());
            extra.insert(EXTRA_KERNEL_NAME.to_string(), s(&k.name));
            extra.insert(EXTRA_NCU_ID.to_string(), toml::Value::Integer(i64::try_from(k.id).unwrap_or(i64::MAX)));
            if let Some(g) = k.grid {
                extra.insert(EXTRA_GRID.to_string(), dim_value(g));
            }
            if let Some(b) = k.block {
                extra.insert(EXTRA_BLOCK.to_string(), dim_value(b));
            }
            if let Some(c) = k.sm_cycles {
                extra.insert(EXTRA_SM_CYCLES.to_string(), toml::Value::Float(c));
            }
            if let Some(cc) = &k.cc {
                extra.insert("cc".into(), s(cc));
            }
            if let Some(d) = &k.device {
                extra.insert("device".into(), s(d));
            }
            if let Some(c) = &k.sm_clock_from {
                extra.insert("sm_clock_from".into(), s(&c.to_string()));
            }
            if let Some(d) = k.dram_clock_mhz {
                extra.insert("dram_clock_mhz".into(), toml::Value::Float(d));
            }
            extra.insert("duration_metric".into(), s(&k.duration_metric));
            extra.insert("ncu_layout".into(), s(&k.layout.to_string()));
            let hardware = hardware.map(str::to_string).or_else(|| k.device_name.clone()).unwrap_or_else(|| {
                format!(
                    "GPU {} (CC {}), name not exported",
                    k.device.as_deref().unwrap_or("?"),
                    k.cc.as_deref().unwrap_or("?")
                )
            });
            // The export names no clocks or method beyond what `extra` keeps.
            Case {
                hardware,
                clock_mhz: k.sm_clock_mhz,
                source: source.clone(),
                locator: format!("ID {}, {}", k.id, k.name),
                how_read: "Nsight Compute CSV".into(),
                extra,
                file: path.to_path_buf(),
                line: k.line,
                ..Case::new(format!("{stem}-{}", k.id), Kind::Other(KERNEL_KIND.to_string()), Metric::Us, k.duration_us)
            }
        })
        .collect()
}
