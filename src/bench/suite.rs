//! The built-in benchmark suite: one trace of every family, made in-process by the same code
//! `gpusim trace ...` runs (the workloads registry, the MoE layer generator), plus the shipped
//! FFMA example and a large flat Accel-Sim trace written once to a cache folder.

use std::path::{Path, PathBuf};

use gpusim_configs::Arch;
use gpusim_isa::{KernelSource, MemTraceSource, TraceSource};

use crate::error::{CliError, CliResult};

/// The shipped compute-bound example (the "shipped FFMA example").
const FFMA_EXAMPLE: &str = include_str!("../../examples/ffma_bound.trace");

/// Which cases a suite holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Suite {
    /// The small sizes: about a minute in a release build.
    Quick,
    /// Everything, 8192³ GEMMs included.
    Full,
}

/// How a case's trace is made.
#[derive(Clone, Copy, Debug)]
enum Input {
    /// The shipped FFMA example, read by the text reader from memory.
    FfmaExample,
    /// A registry generator with `key=value` parameters.
    Generator(&'static str, &'static [(&'static str, &'static str)]),
    /// `gpusim trace moe` with its defaults but this many tokens and experts.
    Moe { tokens: u64, experts: u64 },
    /// The FFMA example's kernel cut to this many CTAs, flattened into an Accel-Sim trace on
    /// disk (loops unrolled, one line per warp instruction), so reading it is part of the figure;
    /// parsed on the simulation's thread (`ahead` false: one core, as issue 12's goal counts it)
    /// or on a thread of its own (what a machine of two cores or more does by default).
    AccelSimFlat { ctas: u32, ahead: bool },
}

/// One benchmark case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub name: &'static str,
    pub arch: &'static str,
    pub what: &'static str,
    input: Input,
    /// In the quick suite too (else only in the full one).
    quick: bool,
}

const fn case(name: &'static str, arch: &'static str, what: &'static str, input: Input, quick: bool) -> Case {
    Case { name, arch, what, input, quick }
}

use Input::*;

/// Every case, in the order the table lists them.
pub const CASES: &[Case] = &[
    case("ffma", "h100-sxm5-80gb", "FFMA-bound example, 1024 CTAs", FfmaExample, true),
    case("stream-copy", "h100-sxm5-80gb", "STREAM copy, 256 MiB arrays", Generator("stream-copy", &[]), true),
    case("gemm-a100-4k", "a100-sxm4-80gb", "GEMM bf16 4096³, Ampere multistage", Generator("gemm", &[]), true),
    case("gemm-h100-4k", "h100-sxm5-80gb", "GEMM bf16 4096³, Hopper warp-specialised", Generator("gemm", &[]), true),
    case(
        "gemm-a100-8k",
        "a100-sxm4-80gb",
        "GEMM bf16 8192³, Ampere multistage",
        Generator("gemm", &[("m", "8192"), ("n", "8192"), ("k", "8192")]),
        false,
    ),
    case(
        "gemm-h100-8k",
        "h100-sxm5-80gb",
        "GEMM bf16 8192³, Hopper warp-specialised",
        Generator("gemm", &[("m", "8192"), ("n", "8192"), ("k", "8192")]),
        false,
    ),
    case(
        "fa2-a100",
        "a100-sxm4-80gb",
        "FA2 forward, batch 8 × 16 heads × 2048, d 128",
        Generator("attention", &[("recipe", "fa2"), ("batch", "8"), ("seqlen", "2048")]),
        true,
    ),
    case(
        "fa3-h100",
        "h100-sxm5-80gb",
        "FA3 forward, batch 8 × 16 heads × 2048, d 128",
        Generator("attention", &[("recipe", "fa3"), ("batch", "8"), ("seqlen", "2048")]),
        true,
    ),
    case(
        "moe-h800",
        "h800-sxm5",
        "MoE layer, `gpusim trace moe` defaults (4096 tokens)",
        Moe { tokens: 4096, experts: 256 },
        false,
    ),
    case(
        "moe-h800-small",
        "h800-sxm5",
        "MoE layer, `gpusim trace moe --tokens 512 --experts 32`",
        Moe { tokens: 512, experts: 32 },
        true,
    ),
    case(
        "accelsim-flat",
        "h100-sxm5-80gb",
        "flat Accel-Sim trace of the FFMA loop, 114 CTAs, parsing included",
        AccelSimFlat { ctas: 114, ahead: false },
        true,
    ),
    case(
        "accelsim-flat-ahead",
        "h100-sxm5-80gb",
        "the same, parsed on a second thread (read ahead)",
        AccelSimFlat { ctas: 114, ahead: true },
        true,
    ),
    case(
        "tiny",
        "h100-sxm5-80gb",
        "flat Accel-Sim trace, 2 CTAs (for tests)",
        AccelSimFlat { ctas: 2, ahead: false },
        false,
    ),
];

impl Suite {
    /// The cases of the suite (`tiny`, a test case, is in neither).
    pub fn cases(self) -> Vec<&'static Case> {
        CASES.iter().filter(|c| c.name != "tiny" && (c.quick || self == Suite::Full)).collect()
    }
}

/// The case called `name`, or an error listing the names.
pub fn find(name: &str) -> CliResult<&'static Case> {
    CASES.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
        CliError::input(format!("--only: unknown case `{name}`; valid names: {}", names.join(", ")))
    })
}

/// The folder the flat Accel-Sim traces are written to once: `$GPUSIM_BENCH_CACHE`, else
/// `gpusim-bench` in the system's temporary folder.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("GPUSIM_BENCH_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("gpusim-bench"))
}

impl Case {
    /// Writes what the case needs on disk before it runs (the flat Accel-Sim trace), once.
    pub fn prepare(&self) -> CliResult {
        if let AccelSimFlat { ctas, .. } = self.input {
            let dir = flat_dir(ctas);
            if !dir.join("kernelslist.g").is_file() {
                write_flat(&dir, ctas)?;
            }
        }
        Ok(())
    }

    /// The case's trace, ready to simulate (the Accel-Sim one opened through `isa::open`).
    pub fn source(&self, arch: &Arch) -> CliResult<Box<dyn TraceSource>> {
        let gen_err =
            |e: gpusim_workloads::WorkloadError| CliError::input(format!("bench case {}: {}", self.name, e.0));
        Ok(match self.input {
            FfmaExample => Box::new(gpusim_isa::text::TextReader::from_reader(
                "examples/ffma_bound.trace",
                std::io::Cursor::new(FFMA_EXAMPLE.as_bytes()),
            )),
            Generator(name, params) => {
                let params: Vec<(String, String)> =
                    params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                gpusim_workloads::find(name).map_err(gen_err)?.source(&params, arch).map_err(gen_err)?
            }
            Moe { tokens, experts } => {
                let layer = gpusim_workloads::moe::MoeLayer { tokens, experts, ..Default::default() };
                let lt = gpusim_workloads::moe::generate_layer(arch, &layer)
                    .map_err(|e| CliError::input(format!("bench case {}: {e}", self.name)))?;
                Box::new(gpusim_workloads::registry::LazySource::from_trace(lt.trace))
            }
            AccelSimFlat { ctas, ahead } => {
                gpusim_isa::open::open_with(&flat_dir(ctas), gpusim_isa::open::ReadOptions { read_ahead: ahead })?.1
            }
        })
    }
}

/// Where the flat trace of `ctas` CTAs is kept. The name carries the writer's format (`v2`:
/// static PCs, the same in every loop iteration as a real tracer's), so a trace written by an
/// older writer is not reused.
fn flat_dir(ctas: u32) -> PathBuf {
    cache_dir().join(format!("accelsim-flat-v2-ffma-{ctas}"))
}

/// Writes the FFMA example's kernel, cut to `ctas` CTAs, as an Accel-Sim trace in `dir`
/// (through a temporary folder renamed into place, so a half-written trace is never used).
fn write_flat(dir: &Path, ctas: u32) -> CliResult {
    let io = |p: &Path, e: std::io::Error| CliError::input(format!("{}: {e}", p.display()));
    let mut trace = gpusim_isa::text::read_trace("examples/ffma_bound.trace", FFMA_EXAMPLE)?;
    for k in &mut trace.kernels {
        k.info.grid = gpusim_isa::Dim3::new(ctas, 1, 1);
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = parent.join(format!(".tmp-{}-{}", std::process::id(), ctas));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    let mut list = String::new();
    let mut src = MemTraceSource::new(trace);
    let mut n = 0;
    while let Some(mut k) = src.next_kernel()? {
        n += 1;
        let file = format!("kernel-{n}.traceg");
        let path = tmp.join(&file);
        let f = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        gpusim_isa::accelsim::write_traceg(&mut *k as &mut dyn KernelSource, &mut w, &path.display().to_string())?;
        std::io::Write::flush(&mut w).map_err(|e| io(&path, e))?;
        list.push_str(&file);
        list.push('\n');
    }
    let lp = tmp.join("kernelslist.g");
    std::fs::write(&lp, list).map_err(|e| io(&lp, e))?;
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another bench wrote it meanwhile.
        Err(_) if dir.join("kernelslist.g").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => Err(io(dir, e)),
    }
}
