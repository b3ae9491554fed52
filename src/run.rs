//! `gpusim run`.

use std::path::{Path, PathBuf};

use clap::Args;
use gpusim_configs::{Arch, Hertz};
use gpusim_isa::KernelInfo;
use gpusim_sim_core::{CtaEvent, MemSample, Observer, Report, SimErrorKind, SimOptions, SmSample, simulate_observed};

use crate::error::{CliError, CliResult};
use crate::print;
use crate::progress::RunProgress;
use crate::timeline::{DEFAULT_MAX_CTAS, Timeline, TimelineBy};

#[derive(Args)]
pub struct RunArgs {
    /// Chip: a built-in preset name (see `gpusim arch list`) or a TOML file.
    #[arg(long)]
    pub arch: String,
    /// Write the report as JSON (docs/report-schema.md) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override the SM clock, in MHz.
    #[arg(long)]
    pub clock_mhz: Option<f64>,
    /// Memory model by name, overriding the chip's `sim.memory_model`: `hierarchy` (L1, L2
    /// partitions, HBM) or `simple` (latency and bandwidth only).
    #[arg(long)]
    pub memory_model: Option<String>,
    /// Launch the trace's kernels as one CUDA graph: the gap between dependent kernels is
    /// `sim.graph_launch_overhead` instead of `sim.kernel_launch_overhead`. Shorthand for the
    /// chip parameter `sim.launch = "graph"`, set through the parameter system's overrides.
    #[arg(long)]
    pub cuda_graph: bool,
    /// Write the report as one self-contained HTML page (speed of light, warp states,
    /// roofline) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Write the run as Chrome trace-event JSON (open it in Perfetto or chrome://tracing): CTA
    /// spans per SM, kernel spans per stream, DRAM bandwidth and L2 hit rate counters.
    #[arg(long, value_name = "FILE.json")]
    pub timeline: Option<PathBuf>,
    /// Timeline tracks per SM or per GPC.
    #[arg(long, value_enum, default_value = "sm", requires = "timeline")]
    pub timeline_by: TimelineBy,
    /// CTA spans drawn one by one in the timeline; past it CTAs are aggregated per kernel and
    /// SM (the file says so), which bounds its size.
    #[arg(long, default_value_t = DEFAULT_MAX_CTAS, requires = "timeline")]
    pub timeline_max_ctas: usize,
    /// Set from the global `--quiet`.
    #[arg(skip)]
    pub quiet: bool,
    /// Set from the global `--verbose`.
    #[arg(skip)]
    pub verbose: bool,
    /// Refuse a chip whose model state would exceed this much memory (e.g. `4 GiB`, `512 MiB`):
    /// an `l2.size` typo asks for gigabytes of tags. The bound is worked out before anything is
    /// built (sim_core::footprint).
    #[arg(long, default_value = "4 GiB", value_parser = parse_bytes)]
    pub max_memory: gpusim_configs::Bytes,
    /// Sample long grids: simulate the ramp-up, a few steady waves and the tail in detail and
    /// extrapolate the waves between; a grid of one wave skips iterations of its CTAs' main
    /// loop once their throughput is steady (the report marks sampled kernels and gives an
    /// error estimate). Optionally the waves of each part, `WARMUP:MEASURE:TAIL[:REWARM]`
    /// (default `2:4:1:1`).
    #[arg(long, num_args = 0..=1, default_missing_value = crate::run::SAMPLE_DEFAULT, value_name = "WARMUP:MEASURE:TAIL[:REWARM]", value_parser = parse_sample)]
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Threads the run may use (default: the number of cores). The simulation runs on one;
    /// with two or more, each Accel-Sim kernel is parsed on a thread of its own ahead of it.
    /// The results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Trace: gpusim text or binary, an Accel-Sim kernelslist.g, or a folder holding one.
    pub trace: PathBuf,
}

/// How a run with `threads` (default: the number of cores) reads its trace.
pub fn read_options(threads: Option<usize>) -> CliResult<gpusim_isa::open::ReadOptions> {
    Ok(match threads {
        Some(0) => return Err(CliError::input("--threads: must be at least 1")),
        Some(n) => gpusim_isa::open::ReadOptions { read_ahead: n > 1 },
        None => gpusim_isa::open::ReadOptions::default(),
    })
}

/// Loads the chip and applies `--clock-mhz`.
pub fn load_arch(name: &str, clock_mhz: Option<f64>) -> CliResult<Arch> {
    let mut arch = gpusim_configs::load(name)?;
    if let Some(mhz) = clock_mhz {
        if !(mhz.is_finite() && mhz > 0.0 && mhz < 100_000.0) {
            return Err(CliError::input(format!("--clock-mhz: `{mhz}` is not a plausible clock (0 < MHz < 100000)")));
        }
        arch.clocks.lock_sm(Hertz((mhz * 1e6).round() as u64));
        gpusim_configs::validate(&arch).map_err(|e| CliError::input(format!("--clock-mhz {mhz}: {e}")))?;
    }
    Ok(arch)
}

/// What `--sample` alone means: [`gpusim_sim_core::SampleOptions::default`] as text (a test
/// checks they agree; clap needs a `&'static str`).
pub const SAMPLE_DEFAULT: &str = "2:4:1:1";

/// `WARMUP:MEASURE:TAIL[:REWARM]` waves of `--sample`.
pub fn parse_sample(s: &str) -> Result<gpusim_sim_core::SampleOptions, String> {
    let bad = || {
        format!(
            "`{s}`: expected WARMUP:MEASURE:TAIL[:REWARM] waves, e.g. `2:4:1:1` (warm-up ≥ 1, measure ≥ 2, tail ≥ 1, re-warm ≥ 0)"
        )
    };
    let n: Vec<u32> = s
        .split(':')
        .map(|x| x.trim().parse::<u32>().ok().filter(|&v| v <= 1000))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let d = gpusim_sim_core::SampleOptions::default();
    let (w, m, t, r) = match n.as_slice() {
        [w, m, t] => (*w, *m, *t, d.rewarm_waves),
        [w, m, t, r] => (*w, *m, *t, *r),
        _ => return Err(bad()),
    };
    if w < 1 || m < 2 || t < 1 {
        return Err(bad());
    }
    Ok(gpusim_sim_core::SampleOptions { warmup_waves: w, measure_waves: m, tail_waves: t, rewarm_waves: r })
}

fn parse_bytes(s: &str) -> Result<gpusim_configs::Bytes, String> {
    s.parse::<gpusim_configs::Bytes>().map_err(|e| format!("`{s}`: {e} (e.g. `4 GiB`)"))
}

/// Fails with exit code 2 when the chip's model would need more than `limit` bytes, naming the
/// parts and the parameters that size them.
pub fn check_footprint(arch: &Arch, limit: gpusim_configs::Bytes) -> CliResult {
    let f = gpusim_sim_core::footprint(arch);
    if f.total() <= limit.0 {
        return Ok(());
    }
    let parts: Vec<String> = f
        .parts()
        .iter()
        .filter(|p| p.1 > 0)
        .map(|(what, b, keys)| format!("{what} {} ({keys})", print::bytes(*b)))
        .collect();
    Err(CliError::input(format!(
        "chip `{}`: its model needs up to {} of memory, more than --max-memory {}: {}",
        arch.name,
        print::bytes(f.total()),
        print::bytes(limit.0),
        parts.join(", ")
    )))
}

fn write_json(path: &Path, r: &Report) -> CliResult {
    let text =
        serde_json::to_string_pretty(r).map_err(|e| CliError::input(format!("cannot encode the report: {e}")))?;
    crate::output::write_atomic(path, (text + "\n").as_bytes())
}

/// Simulates `trace` on `arch`; on failure the partial report of finished kernels is returned
/// alongside the error.
pub fn simulate_file(
    arch: &Arch,
    trace: &Path,
    read: gpusim_isa::open::ReadOptions,
    opts: &SimOptions,
) -> Result<Report, (CliError, Option<Box<Report>>)> {
    simulate_file_observed(arch, trace, read, opts, &mut gpusim_sim_core::NoObserver)
}

/// [`simulate_file`] with an observer watching the run.
pub fn simulate_file_observed<O: Observer>(
    arch: &Arch,
    trace: &Path,
    read: gpusim_isa::open::ReadOptions,
    opts: &SimOptions,
    obs: &mut O,
) -> Result<Report, (CliError, Option<Box<Report>>)> {
    let (_fmt, mut src) = gpusim_isa::open::open_with(trace, read).map_err(|e| (CliError::from(e), None))?;
    let res = simulate_observed(arch, &mut *src, opts, obs);
    for d in src.take_diagnostics() {
        eprintln!("{d}");
    }
    res.map_err(|mut e| {
        let partial = e.partial.take();
        let msg = match &e.kind {
            SimErrorKind::Trace(_) => e.to_string(),
            _ => format!("{}: {e}", trace.display()),
        };
        let err = match (&e.kind, crate::interrupt::exit_code()) {
            (SimErrorKind::Interrupted { .. }, Some(code)) => CliError::interrupted(msg, code),
            _ => CliError::input(msg),
        };
        (err, partial)
    })
}

/// What watches a `gpusim run`: the progress display and, when asked, the timeline.
struct RunObserver {
    progress: RunProgress,
    timeline: Option<Timeline>,
}

impl Observer for RunObserver {
    fn kernel_start(&mut self, k: &KernelInfo, cycle: u64) {
        if let Some(t) = &mut self.timeline {
            t.kernel_start(k, cycle);
        }
    }
    fn kernel_end(&mut self, k: &KernelInfo, cycle: u64) {
        self.progress.kernel_end(k, cycle);
        if let Some(t) = &mut self.timeline {
            t.kernel_end(k, cycle);
        }
    }
    fn cta_launch(&mut self, e: &CtaEvent) {
        if let Some(t) = &mut self.timeline {
            t.cta_launch(e);
        }
    }
    fn cta_retire(&mut self, e: &CtaEvent) {
        self.progress.cta_retire(e);
        if let Some(t) = &mut self.timeline {
            t.cta_retire(e);
        }
    }
    fn sample_interval(&self) -> Option<u64> {
        self.timeline.as_ref().and_then(Timeline::sample_interval)
    }
    fn sample(&mut self, cycle: u64, sms: &[SmSample]) {
        if let Some(t) = &mut self.timeline {
            t.sample(cycle, sms);
        }
    }
    fn memory_sample(&mut self, cycle: u64, m: &MemSample) {
        if let Some(t) = &mut self.timeline {
            t.memory_sample(cycle, m);
        }
    }
}

/// Writes the files asked for besides the text: JSON, HTML page, timeline.
fn write_outputs(a: &RunArgs, r: &Report, timeline: Option<&Timeline>) -> CliResult {
    if let Some(j) = &a.json {
        write_json(j, r)?;
    }
    if let Some(h) = &a.report {
        let doc = crate::report_cmd::run_document(r, &a.trace.display().to_string())?;
        crate::report_cmd::write_html(h, &doc)?;
    }
    if let (Some(path), Some(t)) = (&a.timeline, timeline) {
        t.write(path, &r.arch)?;
    }
    if a.verbose {
        for p in [&a.json, &a.report, &a.timeline].into_iter().flatten() {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

pub fn run(a: RunArgs) -> CliResult {
    let mut arch = load_arch(&a.arch, a.clock_mhz)?;
    if a.cuda_graph {
        arch = arch
            .with_override("sim.launch", &toml::Value::String("graph".into()))
            .map_err(|e| CliError::input(format!("--cuda-graph: {e}")))?;
    }
    check_footprint(&arch, a.max_memory)?;
    let read = read_options(a.threads)?;
    for (path, what) in [(&a.json, "--json"), (&a.report, "--report"), (&a.timeline, "--timeline")] {
        if let Some(p) = path {
            crate::output::check_writable(p, what)?;
        }
    }
    let stop = crate::interrupt::install()?;
    let opts = SimOptions { memory_model: a.memory_model.clone(), stop: Some(stop), sample: a.sample };
    if a.timeline_max_ctas == 0 {
        return Err(CliError::input("--timeline-max-ctas: must be at least 1"));
    }
    let mut obs = RunObserver {
        progress: RunProgress::new(a.quiet),
        timeline: a.timeline.as_ref().map(|_| Timeline::new(&arch, a.timeline_by, a.timeline_max_ctas)),
    };
    let started = std::time::Instant::now();
    let res = simulate_file_observed(&arch, &a.trace, read, &opts, &mut obs);
    obs.progress.finish();
    if a.verbose {
        eprintln!("simulated in {:.2} s", started.elapsed().as_secs_f64());
    }
    match res {
        Ok(r) => {
            if !a.quiet {
                print!("{}", print::report(&r, &a.trace.display().to_string()));
            }
            write_outputs(&a, &r, obs.timeline.as_ref())
        }
        Err((e, partial)) => {
            // Never lose finished results: print and save what completed before the error.
            if let Some(r) = partial {
                if r.partial.as_ref().is_none_or(|p| p.reason != "interrupted") {
                    eprintln!("the kernels that finished before the error:");
                }
                eprint!("{}", print::report(&r, &a.trace.display().to_string()));
                if let Err(w) = write_outputs(&a, &r, obs.timeline.as_ref()) {
                    eprintln!("error: {w}");
                }
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sample_default_is_sim_cores() {
        let d = gpusim_sim_core::SampleOptions::default();
        assert_eq!(super::parse_sample(super::SAMPLE_DEFAULT), Ok(d));
        assert_eq!(d.to_string(), super::SAMPLE_DEFAULT);
        assert_eq!(super::parse_sample("2:4:1"), Ok(d), "REWARM defaults too");
    }
}
