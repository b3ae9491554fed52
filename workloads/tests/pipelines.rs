//! The multistage copy pipelines overlap copies with compute on the simulated chip: with three
//! stages the copy latency hides behind compute, with one stage it does not.

use gpusim_configs::Arch;
use gpusim_isa::{MemTraceSource, Trace};
use gpusim_sim_core::{SimOptions, simulate};
use gpusim_workloads::ubench::{CopyEngine, CopyPipeline, async_copy_pipeline};

fn cycles(arch: &Arch, t: Trace) -> u64 {
    let mut src = MemTraceSource::new(t);
    let r = simulate(arch, &mut src, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    r.kernels.iter().map(|k| k.cycles).sum()
}

fn run(arch: &Arch, engine: CopyEngine, stages: u32, compute: u32) -> u64 {
    // One CTA: the copy latency (not DRAM bandwidth) is what the pipeline must hide.
    let p =
        CopyPipeline { engine, stages, tiles: 24, compute_per_tile: compute, ctas: Some(1), ..CopyPipeline::default() };
    cycles(arch, async_copy_pipeline(&p, arch).unwrap().trace)
}

fn check(preset: &str, engine: CopyEngine) {
    let arch = gpusim_configs::load_preset(preset).unwrap();
    let compute = 256;
    let one = run(&arch, engine, 1, compute);
    let three = run(&arch, engine, 3, compute);
    // Compute alone: the same kernel with copies that cost nothing is bounded below by the
    // three-stage time; measure the exposure instead: one stage pays the copy latency per tile.
    let exposed = one as f64 / three as f64;
    eprintln!("{preset} {engine:?}: 1 stage {one}, 3 stages {three}, ratio {exposed:.2}");
    assert!(exposed > 1.3, "{preset} {engine:?}: 1 stage {one} cycles, 3 stages {three} cycles");
    // More stages never hurt.
    let four = run(&arch, engine, 4, compute);
    assert!(four <= three + three / 50, "{preset} {engine:?}: 4 stages {four} vs 3 stages {three}");
}

#[test]
fn cp_async_three_stages_hide_copy_latency() {
    check("a100-sxm4-80gb", CopyEngine::CpAsync);
}

#[test]
fn tma_three_stages_hide_copy_latency() {
    check("h100-sxm5-80gb", CopyEngine::Tma);
}
