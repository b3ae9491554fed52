//! GEMM throughput against problem size behaves as on hardware: skinny GEMMs are bound by HBM
//! bandwidth, small ones by latency and waves, and one tile more than a wave costs a wave.

use gpusim_configs::Arch;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::{Report, SimOptions, simulate};
use gpusim_workloads::gemm::{Dtype, GemmProblem, Recipe, default_recipe, generate};

fn problem(m: u64, n: u64, k: u64) -> GemmProblem {
    GemmProblem { m, n, k, batch: 1, dtype: Dtype::Bf16, block_scaled: false }
}

fn run(arch: &Arch, p: &GemmProblem, r: &Recipe) -> Report {
    let t = generate(arch, p, r).unwrap();
    let mut src = MemTraceSource::new(t);
    simulate(arch, &mut src, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn h100() -> Arch {
    gpusim_configs::load_preset("h100-sxm5-80gb").unwrap()
}

/// Peak dense bf16 FLOP/s of the chip at its SM clock.
fn peak(a: &Arch) -> f64 {
    a.tensor.flops_per_clk_per_sm["bf16"] * a.sm.count as f64 * a.clocks.sm.0 as f64
}

#[test]
fn skinny_gemm_is_bound_by_hbm_bandwidth() {
    let a = h100();
    let p = problem(64, 8192, 8192);
    let r = run(&a, &p, &default_recipe(&a, &p));
    let main = &r.kernels[0];
    assert!(main.memory.dram_utilization_pct > 75.0, "DRAM {:.1}% of peak", main.memory.dram_utilization_pct);
    let tflops = p.flops() as f64 / (r.time_us * 1e-6);
    assert!(tflops < 0.3 * peak(&a), "{:.0} TFLOP/s", tflops / 1e12);
}

#[test]
fn small_gemm_is_far_from_peak() {
    let a = h100();
    let p = problem(512, 512, 512);
    let r = run(&a, &p, &default_recipe(&a, &p));
    let tflops = p.flops() as f64 / (r.time_us * 1e-6);
    assert!(tflops < 0.2 * peak(&a), "{:.0} TFLOP/s", tflops / 1e12);
}

#[test]
fn one_tile_row_beyond_a_wave_costs_about_a_wave() {
    let a = h100();
    // 2048 × 2048 with 128 × 256 tiles is 128 tiles: one wave of the 128 CTAs (64 clusters of 2)
    // that fit; 2176 rows are 136 tiles, so 8 CTAs take a second tile.
    let fits = problem(2048, 2048, 4096);
    let recipe = default_recipe(&a, &fits);
    let one = run(&a, &fits, &recipe).time_us;
    let two = run(&a, &problem(2176, 2048, 4096), &recipe).time_us;
    let ratio = two / one;
    assert!(ratio > 1.6 && ratio < 2.3, "one wave {one:.1} us, one tile row more {two:.1} us (×{ratio:.2})");
    // The big, one-wave problem runs near the tensor peak.
    let tflops = fits.flops() as f64 / (one * 1e-6);
    assert!(tflops > 0.6 * peak(&a), "{:.0} TFLOP/s", tflops / 1e12);
}

#[test]
fn large_ampere_gemm_lands_where_cublas_does_on_a100() {
    // cuBLAS reaches 75–90% of A100's 312 TFLOPS on large bf16 GEMMs. One full wave (9 × 12 tiles of
    // 256 × 128 on 108 SMs) with a long K is the steady state of a large GEMM at a test's cost.
    let a = gpusim_configs::load_preset("a100-sxm4-80gb").unwrap();
    let p = problem(2304, 1536, 4096);
    let r = run(&a, &p, &default_recipe(&a, &p));
    let share = p.flops() as f64 / (r.time_us * 1e-6) / peak(&a);
    assert!((0.75..=0.90).contains(&share), "{:.1}% of the 312 TFLOPS peak", share * 100.0);
}
