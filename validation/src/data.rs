//! Measurement files by type, as `gpusim correlate --data` and `gpusim calibrate --data` read
//! them: [`load_data`].
//!
//! - `*.csv`: an Nsight Compute CSV export ([`crate::nsight::load_ncu_csv`]), one `kernel` case
//!   per launch ([`crate::nsight::to_cases`]). [`DataOptions::hardware`] names the GPU where the
//!   export does not; [`DataOptions::traces`] is the trace captured from the same run, attached
//!   to the launches with [`crate::kernel_cases::attach_traces`].
//! - `*.ncu-rep`: an error saying how to export it as CSV.
//! - anything else (`*.toml`, no extension): reference cases ([`crate::reference::load_cases`]).
//!
//! Launches that no kernel of the trace matches stay in the cases, without a trace: the
//! correlation lists them as skipped with the reason, and [`Loaded::warnings`] names them.

use std::path::{Path, PathBuf};

use crate::kernel_cases::{self, EXTRA_TRACE, is_kernel_case};
use crate::nsight;
use crate::reference::{self, Case};

/// How to read measurement files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataOptions {
    /// The device name of CSV launches (`NVIDIA H100 80GB HBM3`), which picks the preset; it
    /// takes precedence over the name the export holds (ncu's details page holds none).
    pub hardware: Option<String>,
    /// A trace of the CSV's kernels: an Accel-Sim `kernelslist.g` or the folder holding it, or
    /// a gpusim trace. Attached to the kernel cases of each CSV file that name no trace.
    pub traces: Option<PathBuf>,
}

/// The file types [`load_data`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataType {
    /// `[[case]]` TOML.
    Reference,
    /// Nsight Compute CSV.
    NsightCsv,
}

impl DataType {
    /// The type of `path`, by its extension (case-insensitive): `csv` is an Nsight Compute
    /// export, anything else `[[case]]` TOML; an Nsight Compute report (`ncu-rep`) is an error
    /// saying how to export it.
    pub fn of(path: &Path) -> Result<DataType, String> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("csv") => Ok(DataType::NsightCsv),
            Some("ncu-rep") => Err(format!(
                "{}: an Nsight Compute report; export it as CSV first (`ncu --import {} --csv --page raw > run.csv`)",
                path.display(),
                path.display()
            )),
            _ => Ok(DataType::Reference),
        }
    }
}

/// What [`load_data`] read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded {
    pub cases: Vec<Case>,
    /// Things the caller should tell the user: launches without a trace kernel.
    pub warnings: Vec<String>,
    /// The trace was attached to this file's kernel cases.
    pub traces_attached: bool,
}

/// Reads one measurement file by its type ([`DataType::of`]). Errors name the file (and the
/// line, for malformed input), as the readers write them; a trace that cannot be read is an
/// error naming it.
pub fn load_data(path: &Path, opts: &DataOptions) -> Result<Loaded, String> {
    let mut out = Loaded::default();
    match DataType::of(path)? {
        DataType::Reference => {
            out.cases = reference::load_cases(path).map_err(|e| e.to_string())?;
        }
        DataType::NsightCsv => {
            let kernels = nsight::load_ncu_csv(path).map_err(|e| e.to_string())?;
            out.cases = nsight::to_cases(path, &kernels, opts.hardware.as_deref());
            if kernels.is_empty() {
                out.warnings.push(format!("{}: no kernel launch in the export", path.display()));
            }
        }
    }
    let needs_trace = |c: &Case| is_kernel_case(c) && !c.extra.contains_key(EXTRA_TRACE);
    if let Some(trace) = &opts.traces
        && out.cases.iter().any(needs_trace)
    {
        let a = kernel_cases::attach_traces(&mut out.cases, trace).map_err(|e| format!("--traces: {e}"))?;
        out.traces_attached = true;
        if !a.unmatched.is_empty() {
            let n = a.matched.len() + a.unmatched.len();
            out.warnings.push(format!(
                "{}: {} of {n} kernel launch(es) match no kernel of {} ({} kernel(s)); they are not simulated: {}",
                path.display(),
                a.unmatched.len(),
                trace.display(),
                a.trace_kernels,
                a.unmatched.join(", ")
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Kind, Metric};
    use crate::kernel_cases::{EXTRA_TRACE_KERNEL, EXTRA_TRACE_UNMATCHED, KERNEL_KIND};

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncu").join(name)
    }

    fn tmp(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpusim-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const TOML: &str = r#"
[[case]]
id = "l1"
kind = "latency"
hardware = "H800 PCIe"
level = "L1"
metric = "cycles"
value = 32.1
trust = "high"
how_read = "h"
source = "s"
locator = "l"
"#;

    #[test]
    fn file_types_by_extension() {
        assert_eq!(DataType::of(Path::new("a/b.toml")), Ok(DataType::Reference));
        assert_eq!(DataType::of(Path::new("run.CSV")), Ok(DataType::NsightCsv));
        // Anything else is TOML, as before CSV was read (`/dev/stdin`, `cases.txt`).
        for toml in ["/dev/stdin", "cases.txt", "x.json"] {
            assert_eq!(DataType::of(Path::new(toml)), Ok(DataType::Reference));
        }
        let e = DataType::of(Path::new("run.ncu-rep")).unwrap_err();
        assert!(e.starts_with("run.ncu-rep: ") && e.contains("--csv"), "{e}");
    }

    #[test]
    fn toml_files_are_reference_cases() {
        let p = tmp("cases.toml", TOML);
        let l = load_data(&p, &DataOptions::default()).unwrap();
        assert_eq!(l.cases.len(), 1);
        assert_eq!((l.cases[0].kind.clone(), l.cases[0].file.clone()), (Kind::Latency, p.clone()));
        assert!(l.warnings.is_empty() && !l.traces_attached);
        // --traces leaves a file without kernel cases alone (the trace is not even opened).
        let opts = DataOptions { traces: Some("/no/such/trace".into()), ..DataOptions::default() };
        assert_eq!(load_data(&p, &opts).unwrap().cases, l.cases);
        // A hand-written kernel case that names no trace gets --traces too.
        let kernel = r#"
[[case]]
id = "k"
kind = "kernel"
hardware = "NVIDIA H100 80GB HBM3"
metric = "us"
value = 19
trust = "medium"
how_read = "h"
source = "s"
locator = "l"
kernel_name = "ffma_bound"
"#;
        let p = tmp("kernel.toml", kernel);
        let opts =
            DataOptions { traces: Some(workspace().join("examples/ffma_bound.trace")), ..DataOptions::default() };
        let l = load_data(&p, &opts).unwrap();
        assert!(l.traces_attached && l.cases[0].extra.contains_key(EXTRA_TRACE), "{l:?}");
        // Errors name the file and line.
        let bad = tmp("bad.toml", "[[case]]\nid = \"x\"\nvalue = = 1\n");
        let e = load_data(&bad, &DataOptions::default()).unwrap_err();
        assert!(e.contains("bad.toml:3:"), "{e}");
        let e = load_data(Path::new("/no/such/cases.toml"), &DataOptions::default()).unwrap_err();
        assert!(e.contains("/no/such/cases.toml"), "{e}");
    }

    #[test]
    fn csv_files_are_kernel_cases_with_traces_attached() {
        let csv = fixture("ffma_bound.csv");
        let plain = load_data(&csv, &DataOptions::default()).unwrap();
        assert_eq!(plain.cases.len(), 1);
        let c = &plain.cases[0];
        assert_eq!(
            (c.kind.as_str(), &c.metric, c.hardware.as_str()),
            (KERNEL_KIND, &Metric::Us, "NVIDIA H100 80GB HBM3")
        );
        assert!(!c.extra.contains_key(EXTRA_TRACE));

        let opts = DataOptions {
            hardware: Some("NVIDIA H200".into()),
            traces: Some(workspace().join("examples/ffma_bound.trace")),
        };
        let l = load_data(&csv, &opts).unwrap();
        assert!(l.traces_attached && l.warnings.is_empty(), "{l:?}");
        let c = &l.cases[0];
        assert_eq!(c.hardware, "NVIDIA H200");
        assert_eq!(c.extra[EXTRA_TRACE_KERNEL].as_integer(), Some(0));
        assert!(Path::new(c.extra[EXTRA_TRACE].as_str().unwrap()).is_absolute());

        // A launch the trace lacks: a warning naming it, and the reason on the case.
        let l = load_data(
            &fixture("accelsim_example.csv"),
            &DataOptions { hardware: None, traces: Some(workspace().join("examples/accelsim")) },
        )
        .unwrap();
        assert_eq!(l.cases.len(), 3);
        assert_eq!(l.warnings.len(), 1);
        let w = &l.warnings[0];
        assert!(w.contains("accelsim_example.csv") && w.contains("1 of 3") && w.contains("accelsim_example-1"), "{w}");
        assert!(l.cases[1].extra[EXTRA_TRACE_UNMATCHED].as_str().unwrap().contains("fill_kernel"));

        // A trace that cannot be read is an error naming it.
        let opts = DataOptions { hardware: None, traces: Some("/no/such/kernelslist.g".into()) };
        let e = load_data(&csv, &opts).unwrap_err();
        assert!(e.contains("--traces") && e.contains("/no/such/kernelslist.g"), "{e}");
    }

    #[test]
    fn malformed_csv_names_file_and_line() {
        let p = tmp(
            "bad.csv",
            "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"1.5\"\n\"1\",\"k\",\"fast\"\n",
        );
        let e = load_data(&p, &DataOptions::default()).unwrap_err();
        assert!(e.contains("bad.csv:3:"), "{e}");
        let e = load_data(Path::new("/no/such/run.csv"), &DataOptions::default()).unwrap_err();
        assert!(e.contains("/no/such/run.csv"), "{e}");
        // An empty export: no cases, a warning.
        let p = tmp("empty.csv", "==PROF== Disconnected from process 1\n");
        match load_data(&p, &DataOptions::default()) {
            Ok(l) => assert!(l.cases.is_empty() && l.warnings.len() == 1, "{l:?}"),
            Err(e) => assert!(e.contains("empty.csv"), "{e}"),
        }
    }
}
