//! The generators by name: [`registry`] lists each with a one-line summary and its parameter
//! table; [`find`] looks one up; [`Generator::generate`] builds its [`Trace`] from `key=value`
//! parameters, [`Generator::source`] hands the same kernels out lazily as a [`TraceSource`].
//! `gpusim trace NAME` dispatches through it.

mod attention;
mod gemm;
pub mod lazy;
mod moe;
mod ubench;

use gpusim_configs::Arch;
use gpusim_isa::{Trace, TraceSource};

pub use lazy::{KernelFn, LayoutFn, LazyKernel, LazySource};

use crate::params::{ParamInfo, WorkloadError};
use crate::ubench::Measure;

/// What a generator built: the trace, a one-line description, and for a microbenchmark what to
/// measure on which kernel.
#[derive(Clone, Debug)]
pub struct Generated {
    pub trace: Trace,
    pub description: String,
    pub measure: Option<Measure>,
    /// Index in `trace.kernels` of the kernel `measure` refers to.
    pub timed_kernel: usize,
}

/// A named group of parameters in a generator's listing (GEMM: the problem, then each recipe).
#[derive(Clone, Debug)]
pub struct ParamGroup {
    pub title: &'static str,
    pub params: Vec<ParamInfo>,
}

/// Builds a generator's trace: its name, the `(key, value)` parameters, the chip.
type BuildFn = fn(&str, &[(String, String)], &Arch) -> Result<Generated, WorkloadError>;

/// One trace generator.
pub struct Generator {
    pub name: &'static str,
    pub summary: &'static str,
    params: fn() -> Vec<ParamGroup>,
    build: BuildFn,
}

impl Generator {
    /// The parameter tables: name, description, unit, default and valid range of each.
    pub fn params(&self) -> Vec<ParamGroup> {
        (self.params)()
    }

    /// Builds the trace from `(key, value)` parameters. Never panics on parameters: unknown
    /// keys, values out of range or of the wrong kind, and combinations that do not fit the
    /// chip are errors that name the parameter.
    pub fn generate(&self, params: &[(String, String)], arch: &Arch) -> Result<Generated, WorkloadError> {
        (self.build)(self.name, params, arch)
    }

    /// The same kernels as [`Generator::generate`], handed out CTA by CTA from each kernel's
    /// programs and layout.
    pub fn source(&self, params: &[(String, String)], arch: &Arch) -> Result<Box<dyn TraceSource>, WorkloadError> {
        Ok(Box::new(LazySource::from_trace(self.generate(params, arch)?.trace)))
    }

    /// The listing `gpusim trace params NAME` prints.
    pub fn help(&self) -> String {
        let mut s = format!("{}: {}\n", self.name, self.summary);
        for g in self.params() {
            s.push_str(&format!("\n{}:\n", g.title));
            let w = g.params.iter().map(|p| p.name.len()).max().unwrap_or(0);
            for p in &g.params {
                s.push_str(&format!(
                    "  {:w$}  {} [{}; default {}; valid {}]\n",
                    p.name, p.description, p.unit, p.default, p.range
                ));
            }
        }
        s
    }
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator").field("name", &self.name).field("summary", &self.summary).finish()
    }
}

/// Every generator, in the order `gpusim trace params` lists them.
pub fn registry() -> &'static [Generator] {
    REGISTRY
}

/// The generator `name`, or an error listing the valid names.
pub fn find(name: &str) -> Result<&'static Generator, WorkloadError> {
    REGISTRY.iter().find(|g| g.name == name).ok_or_else(|| {
        let names: Vec<&str> = REGISTRY.iter().map(|g| g.name).collect();
        WorkloadError(format!("unknown generator `{name}`; valid names: {}", names.join(", ")))
    })
}

/// One line per generator: its name and summary.
pub fn summary_table() -> String {
    let w = REGISTRY.iter().map(|g| g.name.len()).max().unwrap_or(0);
    REGISTRY.iter().map(|g| format!("  {:w$}  {}\n", g.name, g.summary)).collect()
}

const REGISTRY: &[Generator] = &[
    ubench::POINTER_CHASE,
    ubench::STREAM_READ,
    ubench::STREAM_WRITE,
    ubench::STREAM_COPY,
    ubench::STREAM_TRIAD,
    ubench::L2_READ,
    ubench::SHARED_BANKS,
    ubench::CP_ASYNC_PIPELINE,
    ubench::TMA_PIPELINE,
    ubench::DSMEM_LATENCY,
    gemm::GEMM,
    attention::ATTENTION,
    moe::MOE_LAYER,
];
