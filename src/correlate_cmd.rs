//! `gpusim correlate`: simulate the reference cases and compare with the published values.

use std::path::{Path, PathBuf};

use clap::Args;
use gpusim_reports::doc::{Block, Cell, Document, Figure, Section, Table};
use gpusim_reports::scatter::{self, ScatterPlot, ScatterPoint};
use gpusim_validation::Case;
use gpusim_validation::correlate::{
    ArchChoice, Correlation, Options, Progress, RunInfo, StandIn, Status, StreamTable, correlate, correlate_with,
    load_stand_in, parse_kinds,
};
use gpusim_validation::data::{DataOptions, load_data};
use gpusim_validation::gate::{Gate, Presets};

use crate::error::{CliError, CliResult};

#[derive(Args)]
pub struct CorrelateArgs {
    /// A built-in preset: only the cases whose hardware it models are simulated (the others are
    /// listed as skipped); `auto`: every case on the preset its hardware maps to; `calibrated`:
    /// every case on its part's calibrated preset (`<preset>-calibrated`, where one is built in);
    /// or a config file (`next.toml`) named after a built-in preset, which it then stands in for:
    /// that preset's cases simulate it.
    #[arg(long)]
    pub arch: String,
    /// Measurements: `[[case]]` TOML (*.toml, schema in shared/reference/README.md) or an Nsight
    /// Compute CSV export (*.csv, one `kernel` case per launch); repeatable.
    #[arg(long, required = true, num_args = 1..)]
    pub data: Vec<PathBuf>,
    #[command(flatten)]
    pub data_opts: DataArgs,
    /// Kinds of cases: gemm, gemm_twin (our CUDA twins, simulated with their own recipe),
    /// latency, bandwidth, memory (latency and bandwidth), kernel, attention, moe, peak or all;
    /// repeatable or comma-separated. Default: gemm, gemm_twin, latency, bandwidth and kernel.
    #[arg(long)]
    pub kind: Vec<String>,
    /// Write everything (cases, statistics, provenance) as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write correlation.csv, correlation.md, the plot of simulated against published values
    /// (scatter.svg, scatter.png) and all of it as one page (correlation.html) into this
    /// directory (created if missing).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Simulations run in parallel on this many threads (default: the number of cores). The
    /// results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Sample long kernels as `gpusim run --sample` does (validated against full detail on
    /// GEMM, attention, MoE and streaming kernels; tests/sampling.rs): much faster on long
    /// cases, within each kernel's error estimate. Not with `--gate`: the gate file says which
    /// families it judges on sampled runs (`sampled = true`), and runs the others in full detail.
    #[arg(long, num_args = 0..=1, default_missing_value = crate::run::SAMPLE_DEFAULT, value_name = "WARMUP:MEASURE:TAIL[:REWARM]", value_parser = crate::run::parse_sample, conflicts_with = "gate")]
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Accuracy gate (validation/accuracy-gate.toml): after the reports are written, exit 1 if a
    /// family's MAPE is above its limit or fewer of its cases were simulated than it requires.
    #[arg(long)]
    pub gate: Option<PathBuf>,
    /// An earlier version of the gate file: exit 1 if `--gate` loosens any of its thresholds
    /// (they may only be tightened). CI passes the previous commit's file.
    #[arg(long, requires = "gate")]
    pub gate_baseline: Option<PathBuf>,
    /// Set from the global `--quiet`.
    #[arg(skip)]
    pub quiet: bool,
}

/// `--threads`: at least 1; by default `RAYON_NUM_THREADS` where it is set (as rayon's own
/// global pool reads it), else the number of cores.
pub fn threads(arg: Option<usize>) -> CliResult<usize> {
    match arg {
        Some(0) => Err(CliError::input("--threads: must be at least 1")),
        Some(n) => Ok(n),
        None => match std::env::var("RAYON_NUM_THREADS") {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                // rayon reads 0 as "the default".
                Ok(_) => Ok(cores()),
                Err(_) => Err(CliError::input(format!("RAYON_NUM_THREADS: `{v}` is not a thread count"))),
            },
            _ => Ok(cores()),
        },
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How `--data` CSV files are read (shared by `gpusim correlate` and `gpusim calibrate`).
#[derive(Args, Clone, Debug, Default)]
pub struct DataArgs {
    /// The GPU of the CSV files' launches, as the driver names it (`NVIDIA H100 80GB HBM3`); it
    /// picks the preset. Needed where the export does not name it (ncu's details page, a raw
    /// page without device__attribute_display_name); overrides the exported name.
    #[arg(long, value_name = "NAME")]
    pub hardware: Option<String>,
    /// A trace captured from the same run as the CSV files: an Accel-Sim kernelslist.g (or the
    /// folder holding it) or a gpusim trace. Each launch is matched to its kernel in launch
    /// order and by name; launches without one are listed as skipped.
    #[arg(long, value_name = "PATH")]
    pub traces: Option<PathBuf>,
}

/// Reads every `--data` file by its type (duplicate ids are an error); warnings go to stderr
/// unless `quiet`.
pub fn load_all(data: &[PathBuf], a: &DataArgs, quiet: bool) -> CliResult<Vec<Case>> {
    let opts = DataOptions { hardware: a.hardware.clone(), traces: a.traces.clone() };
    let mut cases: Vec<Case> = Vec::new();
    let mut attached = false;
    for f in data {
        let loaded = load_data(f, &opts).map_err(CliError::input)?;
        for w in loaded.warnings.iter().filter(|_| !quiet) {
            eprintln!("warning: {w}");
        }
        attached |= loaded.traces_attached;
        for c in loaded.cases {
            if let Some(first) = cases.iter().find(|o| o.id == c.id) {
                return Err(CliError::input(format!(
                    "{}: duplicate id `{}`, first defined at {}",
                    c.location(),
                    c.id,
                    first.location()
                )));
            }
            cases.push(c);
        }
    }
    if let Some(t) = &a.traces
        && !attached
        && !quiet
    {
        eprintln!("warning: --traces {}: no kernel case without a trace to attach it to", t.display());
    }
    Ok(cases)
}

/// The commit gpusim was built from (build.rs), else the one of the working directory's
/// checkout at run time, else "unknown".
pub fn git_hash() -> String {
    let built = env!("GPUSIM_GIT_HASH");
    if built != "unknown" {
        return built.to_string();
    }
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn write(path: &Path, text: &str) -> CliResult {
    std::fs::write(path, text).map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))
}

/// The unit a case metric is shown in on the plot.
fn metric_unit(metric: &str) -> &str {
    match metric {
        "gbps" => "GB/s",
        "gibps" => "GiB/s",
        "tflops" => "TFLOP/s",
        "us" => "µs",
        "flops_per_clk_per_sm" => "FLOP/clk/SM",
        "bytes_per_clk_per_sm" => "B/clk/SM",
        m => m,
    }
}

/// The scatter plot of the simulated cases (published value > 0 only: the axes are
/// logarithmic), coloured by kind; None when there is no such case.
fn scatter_plot(c: &Correlation) -> Option<ScatterPlot> {
    let points: Vec<ScatterPoint> = c
        .cases
        .iter()
        .filter(|r| r.status == Status::Simulated && r.published.is_finite() && r.published > 0.0)
        .filter_map(|r| {
            Some(ScatterPoint {
                label: r.id.clone(),
                group: r.family.clone(),
                unit: metric_unit(&r.metric).to_string(),
                measured: r.published,
                simulated: r.simulated.filter(|s| s.is_finite() && *s > 0.0)?,
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut plot = ScatterPlot::new(format!("gpusim vs published values (--arch {})", c.provenance.arch));
    plot.points = points;
    Some(plot)
}

/// The correlation as a page of the one document model: provenance, the plot (the same SVG as
/// scatter.svg) and a sortable table of every case.
fn html_document(c: &Correlation, svg: Option<String>) -> Document {
    let p = &c.provenance;
    let mut s = Section::new("Correlation");
    let mut kv = vec![
        ("gpusim".to_string(), format!("{} ({})", p.gpusim_version, p.git_hash)),
        ("arch".to_string(), p.arch.clone()),
        ("kinds".to_string(), p.kinds.join(", ")),
        ("data".to_string(), p.data_files.join(", ")),
        ("memory model".to_string(), p.memory_model.clone()),
    ];
    kv.extend(p.config_hashes.iter().map(|(k, v)| (format!("config {k}"), v.clone())));
    s.push(Block::KeyValues(kv));
    if let Some(svg) = svg {
        s.push(Block::Figure(Figure { caption: "Simulated against published values".into(), svg }));
    }
    let opt = |v: Option<f64>, d: usize| v.map_or(Cell::text("-"), |x| Cell::num(x, d));
    let rows = c
        .cases
        .iter()
        .map(|r| {
            vec![
                Cell::text(&r.id),
                Cell::text(&r.kind),
                Cell::text(metric_unit(&r.metric)),
                Cell::num(r.published, 3),
                opt(r.simulated, 3),
                opt(r.error.map(|e| 100.0 * e), 1),
                Cell::text(format!("{:?}", r.status).to_lowercase()),
                Cell::text(r.reason.clone().unwrap_or_default()),
            ]
        })
        .collect();
    let columns = ["case", "kind", "unit", "published", "simulated", "error %", "status", "reason"];
    s.push(Block::Table(Table { columns: columns.map(String::from).to_vec(), rows }));
    Document { title: format!("gpusim correlate --arch {}", p.arch), subtitle: String::new(), sections: vec![s] }
}

fn write_reports(c: &Correlation, a: &CorrelateArgs) -> CliResult {
    if let Some(j) = &a.json {
        let text =
            serde_json::to_string_pretty(c).map_err(|e| CliError::input(format!("cannot encode the report: {e}")))?;
        write(j, &(text + "\n"))?;
    }
    if let Some(dir) = &a.report {
        std::fs::create_dir_all(dir).map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
        write(&dir.join("correlation.csv"), &c.csv())?;
        let mut md = c.markdown();
        let mut svg = None;
        if let Some(plot) = scatter_plot(c) {
            let svg_path = dir.join("scatter.svg");
            let plot_err = |e: gpusim_reports::Error| CliError::input(format!("{}: {e}", svg_path.display()));
            let text = scatter::render_svg(&plot).map_err(plot_err)?;
            write(&svg_path, &text)?;
            svg = Some(text);
            scatter::write_png(&plot, dir.join("scatter.png")).map_err(|e| CliError::input(e.to_string()))?;
            md += "\n### Plot\n\n![simulated vs measured](scatter.svg)\n";
        }
        write(&dir.join("correlation.md"), &md)?;
        crate::report_cmd::write_html(&dir.join("correlation.html"), &html_document(c, svg))?;
    }
    Ok(())
}

/// `correlate`'s output while it runs: the case table on stdout, a line per case as soon as it
/// and the cases before it are done, and a bar of simulations done (with ETA) on stderr when it
/// is a terminal.
struct LiveTable {
    table: StreamTable,
    bar: indicatif::ProgressBar,
    /// The header goes out with the first simulated row (nothing is printed for a correlation
    /// that simulates nothing until the end).
    header_done: std::sync::atomic::AtomicBool,
}

impl LiveTable {
    fn new(cases: &[gpusim_validation::case::Case], opts: &Options) -> LiveTable {
        LiveTable {
            table: StreamTable::new(cases.iter().filter(|c| opts.kinds.contains(&c.kind))),
            bar: crate::progress::bar(Some(0), false),
            header_done: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Progress for LiveTable {
    fn start(&self, simulations: usize) {
        self.bar.set_length(simulations as u64);
        self.bar.set_message("simulations");
    }
    fn simulated(&self, done: usize, _wall_s: f64) {
        self.bar.set_position(done as u64);
    }
    fn row(&self, _index: usize, row: &gpusim_validation::correlate::CaseRow) {
        let Some(line) = self.table.line(row) else { return };
        let header = !self.header_done.swap(true, std::sync::atomic::Ordering::Relaxed);
        self.bar.suspend(|| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if header {
                let _ = out.write_all(self.table.header().as_bytes());
            }
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        });
    }
}

pub fn correlate_cmd(a: CorrelateArgs) -> CliResult {
    // `auto`, `calibrated` or a preset's name; anything else is a config file standing in for
    // the preset it is named after.
    let (arch, stand_in) = match ArchChoice::parse(&a.arch) {
        Ok(choice) => (choice, None),
        Err(_) => {
            let chip = load_stand_in(&a.arch).map_err(|e| {
                CliError::input(format!("--arch {}: {e}; correlate also takes `auto` and `calibrated`", a.arch))
            })?;
            (ArchChoice::Preset(chip.name.clone()), Some(StandIn { file: a.arch.clone(), arch: chip }))
        }
    };
    let kinds = parse_kinds(&a.kind).map_err(|e| CliError::input(format!("--kind: {e}")))?;
    let threads = threads(a.threads)?;
    let cases = load_all(&a.data, &a.data_opts, a.quiet)?;
    let opts = Options {
        arch,
        kinds,
        threads,
        worst: 5,
        info: RunInfo {
            gpusim_version: env!("CARGO_PKG_VERSION").to_string(),
            git_hash: git_hash(),
            data_files: a.data.iter().map(|p| p.display().to_string()).collect(),
        },
        stop: Some(crate::interrupt::install()?),
        sample: a.sample,
        sample_families: None,
        stand_in,
    };
    let mut opts = opts;
    // Read the gate before the (long) simulations so that a bad file fails at once.
    let gate = a.gate.as_deref().map(Gate::load).transpose().map_err(CliError::input)?;
    let presets = if a.arch == "calibrated" { Presets::Calibrated } else { Presets::BuiltIn };
    if let Some(g) = &gate {
        // The gate file says which families are judged on sampled runs; the others run in full
        // detail.
        let families = g.sampled_families(presets);
        if !families.is_empty() {
            opts.sample = Some(gpusim_sim_core::SampleOptions::default());
            opts.sample_families = Some(families);
        }
    }
    if let Some(g) = &gate
        && g.lines(presets).is_empty()
    {
        return Err(CliError::input(format!(
            "{}: no {} table for --arch {}",
            a.gate.as_deref().unwrap_or(Path::new("")).display(),
            if presets == Presets::Calibrated { "[calibrated.<kind>]" } else { "[family.<kind>]" },
            a.arch
        )));
    }
    let loosened = match (&gate, &a.gate_baseline) {
        (Some(g), Some(b)) => g.loosened_from(&Gate::load(b).map_err(CliError::input)?),
        _ => Vec::new(),
    };
    let c = if a.quiet {
        correlate(&cases, &opts).map_err(CliError::input)?
    } else {
        // The case table is printed row by row as cases finish, then the rest of the report.
        let live = LiveTable::new(&cases, &opts);
        let c = correlate_with(&cases, &opts, &live).map_err(CliError::input)?;
        live.bar.finish_and_clear();
        // An interrupted run says so right after the rows that finished, before the summary.
        print!("{}{}", c.partial_banner(), c.text_after_cases());
        c
    };
    write_reports(&c, &a)?;
    if c.interrupted {
        // What ran is written (marked partial); the gate is not judged on part of the cases.
        let code = crate::interrupt::exit_code().unwrap_or(130);
        return Err(CliError::interrupted("interrupted: the report holds the cases that finished (PARTIAL)", code));
    }
    let Some(gate) = gate else { return Ok(()) };
    let results = gate.check(&c, presets);
    println!("\naccuracy gate {}:", a.gate.as_deref().unwrap_or(Path::new("")).display());
    for r in &results {
        println!("  {r}");
    }
    for l in &loosened {
        println!("  loosened: {l}");
    }
    let failed: Vec<&str> = results.iter().filter(|r| !r.passed()).map(|r| r.family.as_str()).collect();
    if !failed.is_empty() || !loosened.is_empty() {
        let mut why = Vec::new();
        if !failed.is_empty() {
            why.push(format!("families over their limit or short of cases: {}", failed.join(", ")));
        }
        if !loosened.is_empty() {
            why.push("the gate file loosens its baseline (thresholds may only be tightened)".to_string());
        }
        return Err(CliError { message: format!("accuracy gate failed: {}", why.join("; ")), code: 1 });
    }
    Ok(())
}
