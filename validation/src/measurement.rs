//! Measurement files: what `gpusim measure` writes, and any other source of measured numbers
//! that wants to say on which GPU, at which clocks and how it measured.
//!
//! One schema for all sources: the `[[case]]` tables of `shared/reference/published.toml`
//! ([`Case`], read by [`crate::reference`]) plus two file-level tables that apply to every case
//! of the file:
//!
//! ```toml
//! [device]                       # the GPU, as the driver reported it during the run
//! name = "NVIDIA H200"
//! sm_count = 132
//! sm_clock_mhz = 1980.0          # during the run (see clock_source)
//! memory_clock_mhz = 3201.0
//! l2_bytes = 62914560
//! memory_bytes = 150754820096
//! compute_capability = "9.0"
//! driver_version = "580.159"
//! cuda_version = "driver API 13.0; NVRTC 13.5; cuBLAS 13.1.0"
//! clock_source = "..."           # optional: how the clocks were read (NVML, clock64, attributes)
//!
//! [method]                       # how the numbers were taken
//! warmups = 5
//! repetitions = 50
//! statistic = "median"
//! random_inputs = true
//! timer = "CUDA events (CU_EVENT_DEFAULT)"   # optional, like the fields below
//! ```
//!
//! A case may carry its own `[case.device]` / `[case.method]` (a benchmark timed with `clock64`
//! instead of events, say); it then replaces the file's for that case. [`crate::reference`]
//! applies the file-level tables when it loads a file, so [`Case::device`] and [`Case::method`]
//! are filled for every case of a measurement file, whichever reader loaded it. Unknown keys in
//! `[device]` and `[method]` are errors (they are ours to define); unknown case fields are kept as
//! in the reference data.
//!
//! [`Measurements::to_toml`] writes a file; [`parse`] / [`load`] read it back with its
//! file-level tables; [`hardware_for`] names a device the way the reference data and the preset
//! tables do, so that `gpusim correlate --data` finds the preset.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::case::{Case, Error, Kind, Metric};
pub use crate::case::{Device, Method, hardware_for};
use crate::reference::parse_file;

/// `how_read` of every case `gpusim measure` writes.
pub const HOW_READ: &str = "gpusim measure";

/// A measurement file: its file-level tables and its cases.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurements {
    pub device: Option<Device>,
    pub method: Option<Method>,
    /// The cases; after [`parse`], each has the file's device and method unless it has its own.
    pub cases: Vec<Case>,
}

/// Parses a measurement file (any reference file: the tables are optional).
pub fn parse(path: &Path, text: &str) -> Result<Measurements, Error> {
    let (cases, device, method) = parse_file(path, text)?;
    Ok(Measurements { device, method, cases })
}

/// Reads and parses a measurement file.
pub fn load(path: impl AsRef<Path>) -> Result<Measurements, Error> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    parse(path, &text)
}

/// A case with the given identity and value, every optional field empty, trust high,
/// `how_read` = [`HOW_READ`], and `hardware`, `source`, `locator` empty (for the caller to set).
pub fn new_case(id: impl Into<String>, kind: Kind, metric: Metric, value: f64) -> Case {
    Case { how_read: HOW_READ.to_string(), ..Case::new(id, kind, metric, value) }
}

/// A key as TOML writes it: bare when it can be, else quoted.
fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

/// A value on one line (tables inline).
fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let items: Vec<String> = t.iter().map(|(k, v)| format!("{} = {}", key(k), inline(v))).collect();
            if items.is_empty() { "{}".into() } else { format!("{{ {} }}", items.join(", ")) }
        }
        toml::Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        scalar => scalar.to_string(),
    }
}

fn put(out: &mut String, k: &str, v: toml::Value) {
    let _ = writeln!(out, "{} = {}", key(k), inline(&v));
}

fn put_str(out: &mut String, k: &str, v: &Option<String>) {
    if let Some(s) = v {
        put(out, k, toml::Value::String(s.clone()));
    }
}

fn put_u64(out: &mut String, k: &str, v: Option<u64>) {
    if let Some(x) = v {
        // TOML integers are i64; larger values are written as floats rather than wrapped.
        put(out, k, i64::try_from(x).map_or(toml::Value::Float(x as f64), toml::Value::Integer));
    }
}

fn put_f64(out: &mut String, k: &str, v: Option<f64>) {
    if let Some(x) = v {
        put(out, k, toml::Value::Float(x));
    }
}

/// A serialisable table's `key = value` lines (fields in declaration order).
fn table_lines<T: Serialize>(t: &T) -> String {
    // Device and Method hold only strings, numbers and booleans: this cannot fail.
    toml::to_string(t).unwrap_or_else(|e| format!("# (not written: {e})\n"))
}

fn write_case(out: &mut String, c: &Case, device: Option<&Device>, method: Option<&Method>) {
    out.push_str("\n[[case]]\n");
    put(out, "id", toml::Value::String(c.id.clone()));
    put(out, "kind", toml::Value::String(c.kind.as_str().to_string()));
    put(out, "hardware", toml::Value::String(c.hardware.clone()));
    put_f64(out, "clock_mhz", c.clock_mhz);
    put_str(out, "level", &c.level);
    put_f64(out, "footprint_kb", c.footprint_kb);
    put_str(out, "kernel", &c.kernel);
    put_str(out, "dtype", &c.dtype);
    put_str(out, "layout", &c.layout);
    put_u64(out, "m", c.m);
    put_u64(out, "n", c.n);
    put_u64(out, "k", c.k);
    put_u64(out, "batch", c.batch);
    put_u64(out, "heads", c.heads);
    put_u64(out, "seqlen", c.seqlen);
    put_u64(out, "headdim", c.headdim);
    if let Some(b) = c.causal {
        put(out, "causal", toml::Value::Boolean(b));
    }
    put_str(out, "direction", &c.direction);
    put_str(out, "impl", &c.implementation);
    put_u64(out, "experts", c.experts);
    put_u64(out, "topk", c.topk);
    put_u64(out, "tokens", c.tokens);
    put_u64(out, "tokens_per_expert", c.tokens_per_expert);
    put_u64(out, "hidden", c.hidden);
    put_f64(out, "memory_gbps", c.memory_gbps);
    put(out, "metric", toml::Value::String(c.metric.as_str().to_string()));
    put(out, "value", toml::Value::Float(c.value));
    put_f64(out, "value_raw_flops_per_s", c.value_raw_flops_per_s);
    put(out, "trust", toml::Value::String(c.trust.as_str().to_string()));
    put(out, "how_read", toml::Value::String(c.how_read.clone()));
    put(out, "source", toml::Value::String(c.source.clone()));
    put(out, "locator", toml::Value::String(c.locator.clone()));
    put_str(out, "notes", &c.notes);
    for (k, v) in &c.extra {
        put(out, k, v.clone());
    }
    // The case's own tables, where they differ from the file's.
    if let Some(d) = &c.device
        && Some(d) != device
    {
        out.push_str("\n[case.device]\n");
        out.push_str(&table_lines(d));
    }
    if let Some(m) = &c.method
        && Some(m) != method
    {
        out.push_str("\n[case.method]\n");
        out.push_str(&table_lines(m));
    }
}

impl Measurements {
    /// The file as TOML: `header` as `#` comment lines, `[device]`, `[method]`, then the cases.
    /// A case's device or method is written under it only where it differs from the file's.
    /// [`parse`] of the result gives back the same device, method and cases (with the file-level
    /// tables applied, as [`parse`] always does).
    pub fn to_toml(&self, header: &[String]) -> String {
        let mut out = String::new();
        for line in header {
            for l in line.lines() {
                let _ = writeln!(out, "# {l}");
            }
        }
        if let Some(d) = &self.device {
            out.push_str("\n[device]\n");
            out.push_str(&table_lines(d));
        }
        if let Some(m) = &self.method {
            out.push_str("\n[method]\n");
            out.push_str(&table_lines(m));
        }
        for c in &self.cases {
            write_case(&mut out, c, self.device.as_ref(), self.method.as_ref());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{Kind, Metric, load_cases, parse_cases};

    fn device() -> Device {
        Device {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            sm_clock_mhz: 1980.0,
            memory_clock_mhz: 3201.0,
            l2_bytes: 60 << 20,
            memory_bytes: 150_754_820_096,
            compute_capability: "9.0".into(),
            driver_version: "580.159".into(),
            cuda_version: "driver API 13.0; NVRTC 13.5; cuBLAS 13.1.0".into(),
            sm_clock_max_mhz: Some(1980.0),
            memory_clock_max_mhz: Some(3201.0),
            memory_bus_width_bits: Some(6144),
            clock_source: Some("NVML current clocks, sampled while the timed runs ran".into()),
            notes: None,
        }
    }

    fn method() -> Method {
        Method {
            warmups: 5,
            repetitions: 50,
            statistic: "median".into(),
            random_inputs: true,
            timer: Some("CUDA events (CU_EVENT_DEFAULT)".into()),
            buffers: Some("rotating sets whose total exceeds twice the L2".into()),
            check: None,
            notes: Some("line one\nline \"two\"".into()),
        }
    }

    fn sample() -> Measurements {
        let mut gemm = new_case("gemm-bf16-8192", Kind::Gemm, Metric::Tflops, 781.25);
        gemm.hardware = "H200 SXM".into();
        gemm.clock_mhz = Some(1755.5);
        gemm.dtype = Some("bf16 in, fp32 accumulate, bf16 out".into());
        (gemm.m, gemm.n, gemm.k) = (Some(8192), Some(8192), Some(8192));
        gemm.implementation = Some("cuBLAS".into());
        gemm.source = "gpusim 0.1.0 measure".into();
        gemm.locator = "suite quick, cublasGemmEx".into();
        let mut chase = new_case("lat-dram-256mib", Kind::Latency, Metric::Cycles, 612.3);
        chase.hardware = "H200 SXM".into();
        chase.level = Some("DRAM".into());
        chase.footprint_kb = Some(262144.0);
        chase.source = "gpusim 0.1.0 measure".into();
        chase.locator = "suite quick, chase_ca, footprint 262144 kB".into();
        chase.notes = Some("a note with = and # and \\ in it".into());
        chase.method =
            Some(Method { warmups: 1, repetitions: 3, timer: Some("clock64 in the kernel".into()), ..method() });
        chase.extra.insert("cycles_min".into(), toml::Value::Float(600.0));
        let mut table = toml::Table::new();
        table.insert("a b".into(), toml::Value::Integer(1));
        table.insert("c".into(), toml::Value::Array(vec![toml::Value::Boolean(true)]));
        chase.extra.insert("nested".into(), toml::Value::Table(table));
        let mut other_gpu = new_case("bw-l2", Kind::Bandwidth, Metric::Gbps, 9000.0);
        other_gpu.device = Some(Device { sm_clock_mhz: 1500.0, ..device() });
        Measurements { device: Some(device()), method: Some(method()), cases: vec![gemm, chase, other_gpu] }
    }

    /// The cases as `parse` gives them back: the file's tables applied, no location.
    fn expected(m: &Measurements) -> Vec<Case> {
        m.cases
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.device = c.device.or_else(|| m.device.clone());
                c.method = c.method.or_else(|| m.method.clone());
                c
            })
            .collect()
    }

    fn strip(cases: &[Case]) -> Vec<Case> {
        cases
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.file = std::path::PathBuf::new();
                c.line = 0;
                c
            })
            .collect()
    }

    #[test]
    fn round_trip_gives_back_the_same_device_method_and_cases() {
        let m = sample();
        let text = m.to_toml(&["Measured by gpusim measure".into(), "two\nlines".into()]);
        let back = parse(Path::new("m.toml"), &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.device, m.device);
        assert_eq!(back.method, m.method);
        assert_eq!(strip(&back.cases), expected(&m), "{text}");
        // Writing what was read gives the same text.
        assert_eq!(back.to_toml(&["Measured by gpusim measure".into(), "two\nlines".into()]), text);
        // Locations point at the headers.
        for c in &back.cases {
            assert_eq!(text.lines().nth(c.line - 1), Some("[[case]]"), "{}", c.id);
        }
        // Only the cases whose tables differ carry their own.
        assert_eq!(text.matches("[case.method]").count(), 1);
        assert_eq!(text.matches("[case.device]").count(), 1);
    }

    #[test]
    fn measurement_files_load_through_the_reference_reader() {
        let m = sample();
        let dir = std::env::temp_dir().join(format!("gpusim-measurement-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h200-test.toml");
        std::fs::write(&path, m.to_toml(&[])).unwrap();
        let cases = load_cases(&path).unwrap();
        assert_eq!(strip(&cases), expected(&m));
        assert_eq!(cases[0].device.as_ref().unwrap().sm_clock_mhz, 1980.0);
        assert_eq!(cases[2].device.as_ref().unwrap().sm_clock_mhz, 1500.0);
        assert_eq!(cases[1].method.as_ref().unwrap().repetitions, 3);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.device, m.device);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn files_without_tables_and_with_bad_tables() {
        // Reference files have no [device]: nothing is attached.
        let plain = "[[case]]\nid = \"a\"\nkind = \"latency\"\nhardware = \"X\"\nmetric = \"cycles\"\nvalue = 1\n\
                     trust = \"high\"\nhow_read = \"h\"\nsource = \"s\"\nlocator = \"l\"\n";
        let m = parse(Path::new("p.toml"), plain).unwrap();
        assert_eq!((m.device, m.method), (None, None));
        assert_eq!(m.cases[0].device, None);
        // Other top-level tables are ignored by the reference reader.
        let other = format!("[whatever]\nx = 1\n\n{plain}");
        assert_eq!(parse_cases(Path::new("o.toml"), &other).unwrap().len(), 1);
        // A typo in [device] is an error naming the table's line and the key.
        let text = sample().to_toml(&["header".into()]).replace("sm_count = 132", "sm_cont = 132");
        let e = parse(Path::new("t.toml"), &text).unwrap_err().to_string();
        let line = text.lines().position(|l| l == "[device]").unwrap() + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")) && e.contains("sm_cont"), "{e}");
        let e = parse(Path::new("t.toml"), "[method]\nwarmups = -1\n").unwrap_err().to_string();
        assert!(e.contains("[method]"), "{e}");
    }

    #[test]
    fn device_names_map_to_the_preset_tables() {
        use gpusim_configs::preset_for_hardware;
        for (name, sms, hw, preset) in [
            ("NVIDIA H200", 132, "H200 SXM", Some("h200-sxm")),
            ("NVIDIA H100 80GB HBM3", 132, "H100 SXM", Some("h100-sxm5-80gb")),
            ("NVIDIA H100 PCIe", 114, "H100 PCIe", Some("h100-pcie")),
            ("NVIDIA H800", 132, "H800 SXM5", Some("h800-sxm5")),
            ("NVIDIA H800 PCIe", 114, "H800 PCIe", Some("h800-pcie")),
            ("NVIDIA A100-SXM4-80GB", 108, "A100 80GB", Some("a100-sxm4-80gb")),
            ("NVIDIA A100-PCIE-40GB", 108, "A100 PCIe", Some("a100-pcie-40gb")),
            ("NVIDIA H100 NVL", 132, "NVIDIA H100 NVL", None),
            ("NVIDIA H200 NVL", 132, "NVIDIA H200 NVL", None),
            ("NVIDIA GH200 480GB", 132, "NVIDIA GH200 480GB", None),
            ("NVIDIA A100-SXM4-40GB", 108, "NVIDIA A100-SXM4-40GB", None),
            ("NVIDIA GeForce RTX 4090", 128, "NVIDIA GeForce RTX 4090", None),
        ] {
            let h = hardware_for(name, sms);
            assert_eq!(h, hw, "{name}");
            assert_eq!(preset_for_hardware(&h), preset, "{name}");
            // The driver's own name maps to the same preset.
            if preset.is_some() {
                assert_eq!(preset_for_hardware(name), preset, "{name}: driver name");
            }
        }
    }
}
