//! The harness's suite against the simulations: what `gpusim measure` writes is what
//! `gpusim correlate` simulates (kept outside `measure/`, which depends only on `case` and
//! `measurement`).

use gpusim_validation::measure::suite::{FP8_DTYPE, Plan, Suite, chase_level, fp8_implementation};

#[test]
fn fp8_cases_read_as_plain_fp8() {
    use gpusim_validation::case::{Kind, Metric};
    use gpusim_validation::gemm_cases::{GemmDtype, gemm_shape};
    use gpusim_validation::measurement::new_case;
    let mut c = new_case("gemm-cublas-fp8-8192x8192x8192", Kind::Gemm, Metric::Tflops, 1000.0);
    c.dtype = Some(FP8_DTYPE.into());
    c.implementation = Some(fp8_implementation("13.1.0"));
    c.source = "cuBLASLt".into();
    (c.m, c.n, c.k) = (Some(8192), Some(8192), Some(8192));
    let s = gemm_shape(&c).unwrap();
    assert_eq!(s.dtype, GemmDtype::Fp8);
    assert!(!s.block_scaled, "per-tensor scale pointers are not block scaling");
}

#[test]
fn quick_chase_levels_are_the_ones_correlate_simulates() {
    use gpusim_validation::case::{Kind, Metric};
    use gpusim_validation::measurement::new_case;
    use gpusim_validation::memory_cases::{Bench, Plan as CasePlan, memory_case_plan};
    let l2 = 60 << 20; // H200
    let levels: Vec<String> = Plan::new(Suite::Quick).chase_footprints.iter().map(|&f| chase_level(f, l2)).collect();
    assert_eq!(levels, ["L1", "L2", "DRAM", "DRAM"]);
    for (f, level) in Plan::new(Suite::Quick).chase_footprints.iter().zip(&levels) {
        let mut c = new_case("x", Kind::Latency, Metric::Cycles, 100.0);
        c.hardware = "H200 SXM".into();
        c.level = Some(level.clone());
        c.locator = format!("suite quick, chase_ca, footprint {} kB", f / 1024);
        match memory_case_plan(&c) {
            CasePlan::Run { bench: Bench::Chase { footprint_bytes }, preset, .. } => {
                assert_eq!(preset, "h200-sxm");
                assert_eq!(footprint_bytes, *f, "{level}");
            }
            p => panic!("{level}: {p:?}"),
        }
    }
    assert_eq!(chase_level(16 << 20, l2), "L2 (footprint sweep)");
    assert_eq!(chase_level(64 << 20, l2), "L2-DRAM transition (footprint sweep)");
    assert_eq!(chase_level(8 << 10, l2), "L1 (footprint sweep)");
}
