//! `kernel` cases (one measured kernel launch, e.g. from Nsight Compute via
//! [`crate::nsight::to_cases`]) simulated from a trace of the same kernel.
//!
//! A kernel case is a [`Case`] of kind `kernel` ([`KERNEL_KIND`]) with metric `us` (the
//! launch's duration) or `cycles` (its elapsed SM cycles), and in [`Case::extra`]:
//!
//! - `trace` (string): a gpusim trace (text or binary), an Accel-Sim `kernelslist.g`, or a
//!   folder holding one, captured from the same program. A relative path is relative to the
//!   directory of the case's file ([`Case::file`]), or to the current directory when the case
//!   has no file.
//! - `trace_kernel` (integer, optional): the kernel's 0-based index among the trace's kernels,
//!   in launch order. Without it the kernel is found by name ([`name_match`]): `kernel_name`
//!   (string; else the case's `kernel` field), with `grid`/`block` (`[x, y, z]`, optional)
//!   breaking ties between kernels of the same name.
//!
//! [`plan_kernel_case`] turns such a case into a [`KernelJob`] (no I/O); [`run_kernel_job`]
//! opens the trace with the `isa` crate's readers, simulates the selected kernel **alone**
//! (as Nsight Compute measures it: serialised, after the kernels before it have finished) with
//! [`gpusim_sim_core::simulate`], and returns its time in the case's metric.
//! [`attach_traces`] adds `trace`/`trace_kernel` to the kernel cases of an ncu export by
//! matching them, in launch order and by name, to the kernels of one trace
//! (`--data run.csv --traces DIR`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpusim_configs::Arch;
use gpusim_isa::{KernelSource, TraceError, TraceSource, accelsim};
use gpusim_sim_core::simulate;

use crate::case::{Case, Metric};

mod names;
pub use names::{NameMatch, name_match};

/// The `kind` of a kernel case.
pub const KERNEL_KIND: &str = "kernel";
/// `extra` key: the trace to simulate.
pub const EXTRA_TRACE: &str = "trace";
/// `extra` key: the kernel's 0-based index in the trace.
pub const EXTRA_TRACE_KERNEL: &str = "trace_kernel";
/// `extra` key: the kernel's name as measured.
pub const EXTRA_KERNEL_NAME: &str = "kernel_name";
/// `extra` key: the grid, `[x, y, z]` blocks.
pub const EXTRA_GRID: &str = "grid";
/// `extra` key: the block, `[x, y, z]` threads.
pub const EXTRA_BLOCK: &str = "block";
/// `extra` key: Nsight Compute's result ID.
pub const EXTRA_NCU_ID: &str = "ncu_id";
/// `extra` key: measured elapsed SM cycles.
pub const EXTRA_SM_CYCLES: &str = "sm_cycles";
/// `extra` key: why [`attach_traces`] found no kernel for the case (it then has no `trace`);
/// [`plan_kernel_case`] gives it as the reason the case is not simulated.
pub const EXTRA_TRACE_UNMATCHED: &str = "trace_unmatched";

/// Whether a case is a kernel case.
pub fn is_kernel_case(case: &Case) -> bool {
    case.kind.as_str() == KERNEL_KIND
}

/// Which kernel of the trace to simulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSelect {
    /// 0-based index in launch order (`trace_kernel`).
    Index(usize),
    /// The best [`name_match`] (ties: matching grid and block, then the first).
    Name(String),
}

/// The value a kernel case compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelMetric {
    /// Kernel duration, µs.
    Us,
    /// Kernel duration, SM cycles.
    Cycles,
}

/// The simulation of a kernel case.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelJob {
    /// The trace, resolved against the case's directory.
    pub trace: PathBuf,
    pub select: KernelSelect,
    /// The measured kernel's name, when the case gives one.
    pub kernel_name: Option<String>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub metric: KernelMetric,
    /// The preset modelling the case's hardware (`gpusim_configs::preset_for_hardware`), if any.
    pub preset: Option<&'static str>,
    /// The measured SM clock (the case's `clock_mhz`).
    pub clock_mhz: Option<f64>,
}

impl KernelJob {
    /// The job's preset at the job's clock (`memory_cases::arch_for`); an error when no preset
    /// models the hardware.
    pub fn arch(&self) -> Result<Arch, String> {
        let preset = self.preset.ok_or("no preset models the case's hardware")?;
        crate::memory_cases::arch_for(preset, self.clock_mhz)
    }
}

fn dim_from(case: &Case, key: &str) -> Result<Option<[u32; 3]>, String> {
    let Some(v) = case.extra.get(key) else { return Ok(None) };
    let bad = || format!("`{key}` = {v} is not [x, y, z] of positive integers");
    let a = v.as_array().ok_or_else(bad)?;
    if a.is_empty() || a.len() > 3 {
        return Err(bad());
    }
    let mut d = [1u32; 3];
    for (slot, x) in d.iter_mut().zip(a) {
        *slot = x.as_integer().and_then(|i| u32::try_from(i).ok()).filter(|&i| i > 0).ok_or_else(bad)?;
    }
    Ok(Some(d))
}

/// Maps a kernel case to its simulation (see the module documentation for the fields read).
/// Does no I/O: a trace that cannot be opened is [`run_kernel_job`]'s error.
pub fn plan_kernel_case(case: &Case) -> Result<KernelJob, String> {
    if !is_kernel_case(case) {
        return Err(format!("kind `{}` is not `{KERNEL_KIND}`", case.kind));
    }
    let metric = match &case.metric {
        Metric::Us => KernelMetric::Us,
        Metric::Cycles => KernelMetric::Cycles,
        m => return Err(format!("metric `{m}`: kernel cases are compared in us or cycles")),
    };
    let trace = match case.extra.get(EXTRA_TRACE) {
        None => {
            if let Some(why) = case.extra.get(EXTRA_TRACE_UNMATCHED).and_then(|v| v.as_str()) {
                return Err(why.to_string());
            }
            return Err(format!(
                "no `{EXTRA_TRACE}`: a kernel case is simulated from a trace of the same kernel (gpusim or Accel-Sim); \
                 set `{EXTRA_TRACE} = \"path\"` or attach a trace directory"
            ));
        }
        Some(v) => {
            v.as_str().filter(|s| !s.trim().is_empty()).ok_or_else(|| format!("`{EXTRA_TRACE}` = {v} is not a path"))?
        }
    };
    let trace = PathBuf::from(trace);
    let trace = match case.file.parent() {
        Some(dir) if trace.is_relative() && !dir.as_os_str().is_empty() => dir.join(trace),
        _ => trace,
    };
    let kernel_name = match case.extra.get(EXTRA_KERNEL_NAME) {
        Some(v) => Some(v.as_str().ok_or_else(|| format!("`{EXTRA_KERNEL_NAME}` = {v} is not a string"))?.to_string()),
        None => case.kernel.clone(),
    }
    .filter(|n| !n.trim().is_empty());
    let select =
        match case.extra.get(EXTRA_TRACE_KERNEL) {
            Some(v) => KernelSelect::Index(
                v.as_integer()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| format!("`{EXTRA_TRACE_KERNEL}` = {v} is not a kernel index (0, 1, ...)"))?,
            ),
            None => KernelSelect::Name(kernel_name.clone().ok_or_else(|| {
                format!("the case names no kernel: set `{EXTRA_KERNEL_NAME}` or `{EXTRA_TRACE_KERNEL}`")
            })?),
        };
    Ok(KernelJob {
        trace,
        select,
        kernel_name,
        grid: dim_from(case, EXTRA_GRID)?,
        block: dim_from(case, EXTRA_BLOCK)?,
        metric,
        preset: gpusim_configs::preset_for_hardware(&case.hardware),
        clock_mhz: case.clock_mhz,
    })
}

/// Opens a trace of any format, with gpusim's one opener ([`gpusim_isa::open`]).
pub fn open_trace(path: &Path) -> Result<Box<dyn TraceSource>, String> {
    gpusim_isa::open::open(path).map(|(_, src)| src).map_err(|e| e.to_string())
}

fn hash_file(h: &mut crate::hash::Fnv64, path: &Path) -> Result<(), String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
    std::io::copy(&mut f, h).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    Ok(())
}

/// Content hash ([`crate::hash::Fnv64`]) of the trace files the simulation of kernel `kernel`
/// (0-based) of `path` reads: the whole file of a gpusim trace; `kernelslist.g` followed by the
/// kernel's `.traceg` for an Accel-Sim trace. The same files give the same hash wherever they
/// lie; streams the files, allocating nothing of their size.
pub fn trace_hash(path: &Path, kernel: usize) -> Result<String, String> {
    let mut h = crate::hash::Fnv64::default();
    match gpusim_isa::open::trace_files(path).map_err(|e| e.to_string())? {
        (gpusim_isa::open::Format::AccelSim, list) => {
            let t = accelsim::AccelSimTrace::open(&list).map_err(|e| e.to_string())?;
            let traceg = t
                .kernel_paths()
                .nth(kernel)
                .ok_or_else(|| format!("{}: no kernel {kernel} (the list has {})", list.display(), t.num_kernels()))?;
            hash_file(&mut h, &list)?;
            h.update(b"\0");
            hash_file(&mut h, traceg)?;
        }
        (_, file) => hash_file(&mut h, &file)?,
    }
    Ok(h.hex())
}

/// A kernel of a trace, as its header describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKernel {
    /// 0-based, in launch order.
    pub index: usize,
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

/// The kernels of a trace (headers only; the CTAs are skipped).
pub fn list_kernels(path: &Path) -> Result<Vec<TraceKernel>, String> {
    let mut src = open_trace(path)?;
    let mut out = Vec::new();
    while let Some(k) = src.next_kernel().map_err(|e| e.to_string())? {
        let info = k.info();
        out.push(TraceKernel {
            index: out.len(),
            name: info.name.clone(),
            grid: info.grid.as_array(),
            block: info.block.as_array(),
        });
    }
    Ok(out)
}

/// Whether known launch dimensions agree (unknown ones do).
fn dims_agree(want: Option<[u32; 3]>, have: [u32; 3]) -> bool {
    want.is_none_or(|w| w == have)
}

/// The kernel of `kernels` that `name` (with `grid`/`block` when known) selects: the best
/// [`name_match`], then agreeing dimensions, then the first.
pub fn select_kernel(
    kernels: &[TraceKernel],
    name: &str,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
) -> Option<(usize, NameMatch)> {
    let mut best: Option<(usize, (NameMatch, bool))> = None;
    for k in kernels {
        let m = name_match(name, &k.name);
        if m == NameMatch::None {
            continue;
        }
        let key = (m, dims_agree(grid, k.grid) && dims_agree(block, k.block));
        if best.is_none_or(|(_, b)| key > b) {
            best = Some((k.index, key));
        }
    }
    best.map(|(i, (m, _))| (i, m))
}

/// The result of [`run_kernel_job`].
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRun {
    /// In the job's metric: µs or SM cycles.
    pub value: f64,
    pub time_us: f64,
    pub cycles: u64,
    /// The simulated kernel: 0-based index in the trace, and its name there.
    pub kernel_index: usize,
    pub kernel_name: String,
    pub matched_by: NameMatch,
    /// Kernels in the trace.
    pub trace_kernels: usize,
    pub warp_instructions: u64,
    /// The SM clock simulated, MHz.
    pub sim_clock_mhz: f64,
    /// What was simulated, and any disagreement with the measurement (grid, block).
    pub detail: String,
    /// The trace readers' warnings (`W002 ...`).
    pub diagnostics: Vec<String>,
    /// Wall time of reading and simulating, s.
    pub wall_s: f64,
}

/// A trace source that hands out only the kernel at index `skip` of `inner`.
struct OneKernel<'a> {
    inner: &'a mut dyn TraceSource,
    skip: usize,
    done: bool,
}

impl TraceSource for OneKernel<'_> {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        if self.done {
            return Ok(None);
        }
        while self.skip > 0 {
            if self.inner.next_kernel()?.is_none() {
                self.done = true;
                return Ok(None);
            }
            self.skip -= 1;
        }
        self.done = true;
        self.inner.next_kernel()
    }

    fn take_diagnostics(&mut self) -> Vec<gpusim_isa::diag::Diagnostic> {
        self.inner.take_diagnostics()
    }
}

fn fmt_dim(d: [u32; 3]) -> String {
    format!("({}, {}, {})", d[0], d[1], d[2])
}

/// Simulates the job's kernel on `arch` as given (apply the job's clock first, e.g. with
/// [`KernelJob::arch`]): the trace's other kernels are skipped, the kernel runs alone. Errors:
/// the trace cannot be opened or read, no kernel matches (the message lists the trace's
/// kernels), the simulation fails (a panic included) or gives a time that is not positive.
pub fn run_kernel_job(arch: &Arch, job: &KernelJob) -> Result<KernelRun, String> {
    let t0 = Instant::now();
    let kernels = list_kernels(&job.trace)?;
    let shown = job.trace.display();
    let (index, matched_by) = match &job.select {
        KernelSelect::Index(i) if *i < kernels.len() => (*i, NameMatch::ByIndex),
        KernelSelect::Index(i) => {
            return Err(format!("{shown}: trace_kernel = {i}, but the trace has {} kernel(s)", kernels.len()));
        }
        KernelSelect::Name(n) => select_kernel(&kernels, n, job.grid, job.block).ok_or_else(|| {
            let names: Vec<String> = kernels.iter().take(8).map(|k| format!("{}: {}", k.index, k.name)).collect();
            let more = if kernels.len() > 8 { format!(", ... ({} in all)", kernels.len()) } else { String::new() };
            format!(
                "{shown}: no kernel matches `{n}` (the trace has {}{more}); set `{EXTRA_TRACE_KERNEL}` to choose one",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            )
        })?,
    };
    let k = &kernels[index];
    let mut src = open_trace(&job.trace)?;
    let mut one = OneKernel { inner: src.as_mut(), skip: index, done: false };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        simulate(arch, &mut one, &crate::sim_options::options())
    }))
    .map_err(|p| {
        format!("{shown}: kernel {index} `{}`: the simulation panicked: {}", k.name, crate::panic::panic_message(p))
    })?;
    let diagnostics: Vec<String> = one.take_diagnostics().iter().map(|d| d.to_string()).collect();
    let report = result.map_err(|e| format!("{shown}: kernel {index} `{}`: {e}", k.name))?;
    let kr = report.kernels.first().ok_or_else(|| format!("{shown}: kernel {index} `{}` was not simulated", k.name))?;
    let value = match job.metric {
        KernelMetric::Us => kr.time_us,
        KernelMetric::Cycles => kr.cycles as f64,
    };
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("{shown}: kernel {index} `{}`: simulated {value} {:?}", k.name, job.metric));
    }
    let mut detail = format!(
        "kernel {index} of {} `{}` ({}), grid {} block {}: {} cycles, {:.3} µs at {:.0} MHz",
        kernels.len(),
        k.name,
        matched_by.as_str(),
        fmt_dim(k.grid),
        fmt_dim(k.block),
        kr.cycles,
        kr.time_us,
        report.sm_clock_mhz
    );
    for (what, want, have) in [("grid", job.grid, k.grid), ("block", job.block, k.block)] {
        if let Some(w) = want.filter(|&w| w != have) {
            detail += &format!("; measured {what} {} differs", fmt_dim(w));
        }
    }
    Ok(KernelRun {
        value,
        time_us: kr.time_us,
        cycles: kr.cycles,
        kernel_index: index,
        kernel_name: k.name.clone(),
        matched_by,
        trace_kernels: kernels.len(),
        warp_instructions: kr.warp_instructions,
        sim_clock_mhz: report.sm_clock_mhz,
        detail,
        diagnostics,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// What [`attach_traces`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attached {
    /// The trace the cases now name (absolute).
    pub trace: PathBuf,
    /// Kernels in the trace.
    pub trace_kernels: usize,
    /// `(case id, kernel index)` of each case given a trace.
    pub matched: Vec<(String, usize)>,
    /// Ids of the kernel cases without `trace` that no kernel matched (left without one).
    pub unmatched: Vec<String>,
}

/// Gives the kernel cases of `cases` that have no `trace` yet the kernel of `trace` (an
/// Accel-Sim trace directory, or any trace [`open_trace`] reads) captured from the same program.
///
/// Matching goes in launch order: the cases, in slice order (an ncu export's ID order), are
/// matched greedily to the trace's kernels, each case to the first kernel after the previous
/// match whose name matches ([`name_match`], any level) and whose grid and block agree where
/// both are known. So either side may hold launches the other lacks (ncu's `--launch-skip`,
/// `-k`, a partial trace). A case that matches nothing keeps no trace and the next case
/// searches from the same place. Matched cases get `trace` = the absolute trace path and
/// `trace_kernel` = the kernel's index; unmatched ones get [`EXTRA_TRACE_UNMATCHED`], the
/// reason [`plan_kernel_case`] then gives. Other kinds, and cases that already name a trace, are
/// left alone. Errors: the trace cannot be opened or its kernel headers read.
pub fn attach_traces(cases: &mut [Case], trace: &Path) -> Result<Attached, String> {
    let kernels = list_kernels(trace)?;
    let abs = std::path::absolute(trace).unwrap_or_else(|_| trace.to_path_buf());
    let mut out = Attached { trace: abs.clone(), trace_kernels: kernels.len(), ..Attached::default() };
    let mut next = 0;
    for case in cases.iter_mut().filter(|c| is_kernel_case(c) && !c.extra.contains_key(EXTRA_TRACE)) {
        let name =
            case.extra.get(EXTRA_KERNEL_NAME).and_then(|v| v.as_str()).map(str::to_string).or(case.kernel.clone());
        let (grid, block) = (dim_from(case, EXTRA_GRID).ok().flatten(), dim_from(case, EXTRA_BLOCK).ok().flatten());
        let found = name.as_deref().and_then(|n| {
            kernels[next.min(kernels.len())..].iter().find(|k| {
                name_match(n, &k.name) != NameMatch::None && dims_agree(grid, k.grid) && dims_agree(block, k.block)
            })
        });
        match found {
            Some(k) => {
                case.extra.insert(EXTRA_TRACE.into(), toml::Value::String(abs.display().to_string()));
                case.extra.insert(EXTRA_TRACE_KERNEL.into(), toml::Value::Integer(k.index as i64));
                case.extra.remove(EXTRA_TRACE_UNMATCHED);
                out.matched.push((case.id.clone(), k.index));
                next = k.index + 1;
            }
            None => {
                let mut why = match &name {
                    Some(n) => format!("no kernel of the trace {} matches `{n}`", abs.display()),
                    None => format!("the case names no kernel to look for in the trace {}", abs.display()),
                };
                let dims: Vec<String> = [("grid", grid), ("block", block)]
                    .into_iter()
                    .filter_map(|(what, d)| Some(format!("{what} {}", fmt_dim(d?))))
                    .collect();
                if name.is_some() && !dims.is_empty() {
                    why += &format!(" with {}", dims.join(" and "));
                }
                if next > 0 {
                    why += &format!(" after kernel {} (matched in launch order)", next - 1);
                }
                case.extra.insert(EXTRA_TRACE_UNMATCHED.into(), toml::Value::String(why));
                out.unmatched.push(case.id.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_across_mangling_and_demangling() {
        assert_eq!(name_match("_Z6vecAddPKfS0_Pfi", "_Z6vecAddPKfS0_Pfi"), NameMatch::Exact);
        assert_eq!(
            name_match("vecAdd(float const*, float const*, float*, int)", "_Z6vecAddPKfS0_Pfi"),
            NameMatch::BaseName
        );
        assert_eq!(name_match("blockSum(float const*, float*)", "_Z6vecAddPKfS0_Pfi"), NameMatch::None);
        let cutlass = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x256_32x3_nn_align8>(Params)";
        assert_eq!(
            name_match(
                cutlass,
                "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x256_32x3_nn_align8>(cutlass_80_tensorop_s16816gemm_bf16_128x256_32x3_nn_align8::Params)"
            ),
            NameMatch::Signature
        );
        assert_eq!(
            name_match(
                cutlass,
                "_ZN7cutlass7Kernel2I54cutlass_80_tensorop_s16816gemm_bf16_128x256_32x3_nn_align8EEvNT_6ParamsE"
            ),
            NameMatch::BaseName
        );
        assert_eq!(name_match(cutlass, "Kernel2"), NameMatch::BaseName);
        assert_eq!(
            name_match(
                cutlass,
                "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_nn_align8>(Params)"
            ),
            NameMatch::BaseName
        );
        let ampere = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn";
        assert_eq!(name_match(ampere, ampere), NameMatch::Exact);
        assert_eq!(name_match(ampere, "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn"), NameMatch::None);
        assert_eq!(
            name_match(
                "void at::native::(anonymous namespace)::fill_kernel<float>(float*, long)",
                "_ZN2at6native12_GLOBAL__N_111fill_kernelIfEEvPT_l"
            ),
            NameMatch::BaseName
        );
        assert_eq!(name_match("ffma_bound", "ffma_bound"), NameMatch::Exact);
        assert_eq!(name_match("ffma_bound(float*)", "ffma_bound"), NameMatch::Signature);
        // Nothing panics on odd names.
        for odd in ["", "_Z", "_Z9x", "_ZN", "_ZN3", "(((", ">>>", "a<b(c)>", "_ZL99"] {
            let _ = name_match(odd, odd);
            let _ = name_match(odd, "_Z6vecAddPKfS0_Pfi");
            let _ = name_match("vecAdd(int)", odd);
        }
    }

    #[test]
    fn a_hand_written_kernel_case_plans() {
        let text = r#"
[[case]]
id = "k"
kind = "kernel"
hardware = "NVIDIA H100 80GB HBM3"
clock_mhz = 1755
metric = "cycles"
value = 33240
trust = "medium"
how_read = "ncu details page, by hand"
source = "s"
locator = "l"
trace = "traces/gemm.trace"
kernel_name = "void cutlass::Kernel2<x>(Params)"
grid = [132, 1, 1]
"#;
        let cases = crate::reference::parse_cases(Path::new("/data/run/cases.toml"), text).unwrap();
        let job = plan_kernel_case(&cases[0]).unwrap();
        assert_eq!(job.trace, Path::new("/data/run/traces/gemm.trace"));
        assert_eq!(job.select, KernelSelect::Name("void cutlass::Kernel2<x>(Params)".into()));
        assert_eq!((job.grid, job.block), (Some([132, 1, 1]), None));
        assert_eq!(
            (job.metric, job.preset, job.clock_mhz),
            (KernelMetric::Cycles, Some("h100-sxm5-80gb"), Some(1755.0))
        );
        // An absolute trace stays; a case read from nowhere resolves against the current directory.
        let mut c = cases[0].clone();
        c.extra.insert(EXTRA_TRACE.into(), "/abs/k.trace".into());
        assert_eq!(plan_kernel_case(&c).unwrap().trace, Path::new("/abs/k.trace"));
        c.file = PathBuf::new();
        c.extra.insert(EXTRA_TRACE.into(), "rel/k.trace".into());
        assert_eq!(plan_kernel_case(&c).unwrap().trace, Path::new("rel/k.trace"));
        c.extra.insert(EXTRA_TRACE.into(), 3.into());
        assert!(plan_kernel_case(&c).unwrap_err().contains("not a path"));
    }

    #[test]
    fn trace_hashes_cover_the_files_read() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = ws.join("examples/accelsim");
        let k0 = trace_hash(&dir, 0).unwrap();
        assert_eq!(k0, trace_hash(&dir.join("kernelslist.g"), 0).unwrap());
        assert_ne!(k0, trace_hash(&dir, 1).unwrap());
        assert!(trace_hash(&dir, 2).unwrap_err().contains("no kernel 2"));
        use gpusim_isa::open::{Format, trace_files};
        assert_eq!(trace_files(&dir), Ok((Format::AccelSim, dir.join("kernelslist.g"))));
        let ffma = ws.join("examples/ffma_bound.trace");
        assert_eq!(trace_files(&ffma), Ok((Format::Text, ffma.clone())));
        let text = std::fs::read_to_string(&ffma).unwrap();
        assert_eq!(trace_hash(&ffma, 0).unwrap(), crate::hash::hash_str(&text));
        assert!(trace_hash(Path::new("/no/such.trace"), 0).unwrap_err().contains("/no/such.trace"));
    }
}
