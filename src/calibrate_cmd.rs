//! `gpusim calibrate`: fit a preset's model parameters to reference measurements.

use std::path::PathBuf;

use clap::Args;
use gpusim_validation::calibrate::{CalOptions, calibrate, transfer};
use gpusim_validation::correlate::{load_stand_in, parse_kinds};

use crate::correlate_cmd::{DataArgs, load_all};
use crate::error::{CliError, CliResult};

#[derive(Args)]
pub struct CalibrateArgs {
    /// The built-in preset to calibrate; only the cases whose hardware it models are used. Or a
    /// config file (`*.toml`) named after a built-in preset (its `name`): a calibrated preset to
    /// refine with a second fit, such as scripts/calibrate-presets.sh's attention stage.
    #[arg(long)]
    pub arch: String,
    /// Measurements: `[[case]]` TOML (*.toml) or an Nsight Compute CSV export (*.csv);
    /// repeatable.
    #[arg(long, required = true, num_args = 1..)]
    pub data: Vec<PathBuf>,
    #[command(flatten)]
    pub data_opts: DataArgs,
    /// Dotted config keys to fit, comma-separated or repeated (default: sim.kernel_launch_latency
    /// and tensor.wgmma_base_latency with GEMM cases, else l1.hit_latency, l2.hit_latency and
    /// hbm.latency). Bounds: the schema's range, else [0, 4× the preset's value] ([0, 20000]
    /// when it is 0).
    #[arg(long, value_delimiter = ',')]
    pub fit: Vec<String>,
    /// Also fit datasheet-fixed parameters (SM count, clocks, peak rates, bandwidth, sizes).
    #[arg(long)]
    pub allow_datasheet: bool,
    /// Kinds of cases (as for `gpusim correlate`). Default: gemm, gemm_twin, latency, bandwidth and kernel.
    #[arg(long)]
    pub kind: Vec<String>,
    /// Folds of the cross-validation (at most the number of cases; below 2: none).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Skip GEMM cases above this many FLOPs (2·M·N·K·batch), e.g. 1e12.
    #[arg(long)]
    pub max_flops: Option<f64>,
    /// Iterations of Nelder–Mead per fit.
    #[arg(long, default_value_t = 40)]
    pub max_iter: usize,
    /// Worker threads (default: the number of cores). The result does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Sample long kernels as `gpusim run --sample` does (validated against full detail on
    /// GEMM, attention, MoE and streaming kernels; tests/sampling.rs): what makes fitting on
    /// long cases (attention) affordable. Recorded in the written config and the report.
    #[arg(long, num_args = 0..=1, default_missing_value = crate::run::SAMPLE_DEFAULT, value_name = "WARMUP:MEASURE:TAIL[:REWARM]", value_parser = crate::run::parse_sample)]
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Keep every finished simulation in this directory (one file each) and reuse those already
    /// there: a calibration stopped by Ctrl-C, SIGKILL or a session's end resumes where it
    /// stopped, with the same result. Results written by another build of gpusim are refused.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// The calibrated config to write (inherits the preset).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Write calibration.md into this directory (created if missing).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Cross-generation check: after fitting, set the fitted values on these presets (other
    /// parts, with their own datasheet values) and report the error on their cases before and
    /// after; comma-separated or repeated. Nothing is fitted to their cases.
    #[arg(long, value_delimiter = ',')]
    pub transfer: Vec<String>,
    /// Set from the global `--quiet`.
    #[arg(skip)]
    pub quiet: bool,
}

pub fn calibrate_cmd(a: CalibrateArgs) -> CliResult {
    // A preset by name or a file by path (the one loader `run --arch` uses); either way the
    // chip's name must be a built-in preset's, which picks the cases and which the result inherits.
    let arch = load_stand_in(&a.arch).map_err(|e| CliError::input(format!("--arch {}: {e}", a.arch)))?;
    let kinds = parse_kinds(&a.kind).map_err(|e| CliError::input(format!("--kind: {e}")))?;
    let threads = crate::correlate_cmd::threads(a.threads)?;
    let cases = load_all(&a.data, &a.data_opts, a.quiet)?;
    let opts = CalOptions {
        preset: arch.name.clone(),
        base: Some(arch),
        kinds,
        fit: a.fit.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        allow_datasheet: a.allow_datasheet,
        folds: a.folds,
        threads,
        max_flops: a.max_flops,
        max_iter: a.max_iter,
        data_files: a.data.iter().map(|p| p.display().to_string()).collect(),
        stop: Some(crate::interrupt::install()?),
        progress: Some(Default::default()),
        sample: a.sample,
        store: match &a.resume {
            Some(dir) => Some(std::sync::Arc::new(crate::calibrate_store::DirStore::open(
                dir,
                &crate::correlate_cmd::git_hash(),
            )?)),
            None => None,
        },
    };
    for t in &a.transfer {
        gpusim_configs::load_preset(t).map_err(|e| CliError::input(format!("--transfer: {e}")))?;
    }
    // A spinner with the simulations run so far (on a terminal only; the fit's length is not
    // known in advance), ticked by a watcher thread while the calibration runs.
    let bar = crate::progress::bar(None, a.quiet);
    let done = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            let count = opts.progress.as_ref().expect("set above");
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                bar.set_message(format!(
                    "calibrating {}: {} simulations run",
                    opts.preset,
                    count.load(std::sync::atomic::Ordering::Relaxed)
                ));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        let r = calibrate(&cases, &opts);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    let c = match result {
        Ok(c) => c,
        Err(e) if e.interrupted => {
            // Nothing was fitted: the output preset is left as it was; the report says so.
            if let Some(dir) = &a.report {
                std::fs::create_dir_all(dir)
                    .map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
                let md = format!(
                    "# Calibration of `{}`: PARTIAL\n\n{}; `{}` was not written.\n",
                    a.arch,
                    e.message,
                    a.output.display()
                );
                crate::output::write_atomic(&dir.join("calibration.md"), md.as_bytes())?;
            }
            return Err(CliError::interrupted(e.message, crate::interrupt::exit_code().unwrap_or(130)));
        }
        Err(e) => return Err(CliError::input(e.message)),
    };
    if !a.quiet {
        print!("{}", c.text());
    }
    let write = |p: &std::path::Path, text: &str| {
        std::fs::write(p, text).map_err(|e| CliError::input(format!("{}: cannot write: {e}", p.display())))
    };
    // The fit is written first: a transfer that cannot run must not lose it.
    write(&a.output, &c.config_toml())?;
    let report = |extra: &str| -> CliResult {
        if let Some(dir) = &a.report {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
            write(&dir.join("calibration.md"), &(c.markdown() + extra))?;
            crate::report_cmd::write_html(&dir.join("calibration.html"), &html_document(&c))?;
        }
        Ok(())
    };
    report("")?;
    if a.transfer.is_empty() {
        return Ok(());
    }
    let mut transfers = String::new();
    for t in &a.transfer {
        match transfer(&c, t, &cases, &opts) {
            Ok(tr) => {
                if !a.quiet {
                    print!("{}", tr.text());
                }
                transfers += "\n";
                transfers += &tr.markdown();
            }
            // A target without cases of the selected kinds is a finding, not a failure.
            Err(e) => {
                if !a.quiet {
                    println!("not carried to {t}: {}", e.message);
                }
                transfers += &format!("\n## Not carried to `{t}`\n\n{}\n", e.message);
            }
        }
    }
    report(&transfers)
}

/// The calibration as a page of the one document model (as `correlate --report` writes
/// correlation.html): provenance, the fitted parameters, the errors before and after and out of
/// fold, and every case, each table sortable.
fn html_document(c: &gpusim_validation::calibrate::Calibration) -> gpusim_reports::doc::Document {
    use gpusim_reports::doc::{Block, Cell, Document, Section, Table};
    let texts = |r: &[String]| r.iter().map(Cell::text).collect::<Vec<_>>();
    let mut s = Section::new("Calibration");
    s.push(Block::KeyValues(vec![
        ("gpusim".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("preset".to_string(), c.preset.clone()),
        ("preset config hash".to_string(), c.preset_hash.clone()),
        ("data".to_string(), c.data_files.join(", ")),
        ("cases used / skipped".to_string(), format!("{} / {}", c.cases.len(), c.skipped.len())),
        ("simulations".to_string(), c.simulations.to_string()),
    ]));
    s.push(Block::Subheading("Parameters".into()));
    s.push(Block::Table(Table {
        columns: ["parameter", "preset", "fitted", "bounds", "bounds from"].map(String::from).to_vec(),
        rows: c.param_rows().iter().map(|r| texts(r)).collect(),
    }));
    s.push(Block::Subheading("Errors".into()));
    s.push(Block::Table(Table {
        columns: ["", "MAPE", "weighted |ln(sim/meas)|"].map(String::from).to_vec(),
        rows: c.error_rows().iter().map(|r| texts(r)).collect(),
    }));
    s.push(Block::Subheading("Cases".into()));
    let opt = |v: Option<f64>| v.map_or(Cell::text("failed"), |x| Cell::num(x, 3));
    s.push(Block::Table(Table {
        columns: ["case", "kind", "measured", "before", "after"].map(String::from).to_vec(),
        rows: c
            .cases
            .iter()
            .map(|k| {
                vec![Cell::text(&k.id), Cell::text(&k.kind), Cell::num(k.measured, 3), opt(k.before), opt(k.after)]
            })
            .collect(),
    }));
    Document { title: format!("gpusim calibrate --arch {}", c.preset), subtitle: String::new(), sections: vec![s] }
}
