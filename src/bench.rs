//! `gpusim bench`: simulated warp instructions per second, the speed figure gpusim tracks.

use std::path::PathBuf;
use std::time::Instant;

use gpusim_sim_core::SimOptions;

use crate::error::{CliError, CliResult};
use crate::print::thousands;
use crate::run::{load_arch, simulate_file};

fn default_traces() -> CliResult<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("examples")
        .map_err(|e| CliError::input(format!("examples/: {e} (run from the repository root or name traces)")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "trace" || x == "gtb") || p.join("kernelslist.g").is_file())
        .collect();
    v.sort();
    Ok(v)
}

pub fn bench(arch: &str, repeat: u32, traces: Vec<PathBuf>) -> CliResult {
    let arch = load_arch(arch, None)?;
    let traces = if traces.is_empty() { default_traces()? } else { traces };
    let opts = SimOptions::default();
    println!("{:<40} {:>14} {:>12} {:>10} {:>16}", "trace", "warp insts", "cycles", "host ms", "warp inst/s");
    let (mut all_insts, mut all_secs) = (0u64, 0f64);
    for t in &traces {
        let mut best = f64::INFINITY;
        let mut insts = 0;
        let mut cycles = 0;
        for _ in 0..repeat.max(1) {
            let start = Instant::now();
            let r = simulate_file(&arch, t, &opts).map_err(|(e, _)| e)?;
            best = best.min(start.elapsed().as_secs_f64());
            insts = r.warp_instructions;
            cycles = r.total_cycles;
        }
        all_insts += insts;
        all_secs += best;
        println!(
            "{:<40} {:>14} {:>12} {:>10.1} {:>16}",
            t.display(),
            thousands(insts),
            thousands(cycles),
            best * 1e3,
            thousands((insts as f64 / best) as u64)
        );
    }
    println!(
        "{:<40} {:>14} {:>12} {:>10.1} {:>16}",
        "all",
        thousands(all_insts),
        "",
        all_secs * 1e3,
        thousands((all_insts as f64 / all_secs.max(1e-12)) as u64)
    );
    if cfg!(debug_assertions) {
        println!("note: a debug build; build with --release for meaningful figures");
    }
    Ok(())
}
