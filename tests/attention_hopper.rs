//! Trends of the Hopper attention recipes (FlashAttention-3 forward, decode, MLA decode),
//! simulated on the H100 SXM5 preset. Workloads cannot simulate, so these live in the root crate.

use gpusim_configs::{Arch, load_preset};
use gpusim_sim_core::{Report, SimOptions, simulate};
use gpusim_workloads::attention::{self, AttnSpec, Recipe};

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").expect("preset")
}

/// Simulates `spec`; returns the report and the convention FLOPs.
fn sim(spec: &AttnSpec, arch: &Arch) -> (Report, u64) {
    let a = attention::generate(spec, arch).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut src = gpusim_isa::MemTraceSource::new(a.trace);
    let r = simulate(arch, &mut src, &SimOptions::default()).unwrap_or_else(|e| panic!("{spec}: {e}"));
    (r, a.flops)
}

fn tflops(spec: &AttnSpec, arch: &Arch) -> f64 {
    let (r, f) = sim(spec, arch);
    f as f64 / (r.time_us * 1e6)
}

/// FA3's benchmark shape: batch·seqlen = 16k tokens, 2048 hidden (heads = 2048/d).
fn fa3_case(seqlen: u64, d: u64, causal: bool) -> AttnSpec {
    AttnSpec {
        batch: 16384 / seqlen,
        heads: 2048 / d,
        seqlen,
        headdim: d,
        causal,
        dtype: gpusim_workloads::gemm::Dtype::Fp16,
        recipe: Some(Recipe::Fa3),
        ..AttnSpec::default()
    }
}

#[test]
#[ignore = "prints the FA3 cases; run by hand"]
fn print_fa3_cases() {
    let arch = h100();
    for d in [64, 128] {
        for causal in [false, true] {
            for s in [512u64, 1024, 2048, 4096, 8192, 16384] {
                if std::env::var("FA3_S").is_ok_and(|v| v.parse::<u64>().ok() != Some(s)) {
                    continue;
                }
                let spec = fa3_case(s, d, causal);
                let t0 = std::time::Instant::now();
                let tf = tflops(&spec, &arch);
                println!("d{d} causal={causal} s{s}: {tf:.0} TFLOP/s ({:.1} s)", t0.elapsed().as_secs_f64());
            }
        }
    }
}
