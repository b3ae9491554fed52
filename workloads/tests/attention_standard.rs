//! The unfused "PyTorch standard attention" recipe: GEMM, softmax row kernel, GEMM forward; the
//! backward's four GEMMs and softmax backward, in dependency (stream) order.

use gpusim_configs::load_preset;
use gpusim_workloads::attention::{self, AttnSpec, Pass, Recipe};
use gpusim_workloads::gemm::tensor_flops;

fn spec(pass: Pass, sq: u64) -> AttnSpec {
    AttnSpec {
        batch: 2,
        heads: 4,
        seqlen: sq,
        headdim: 128,
        pass,
        recipe: Some(Recipe::Standard),
        ..AttnSpec::default()
    }
}

#[test]
fn kernels_in_order_with_the_problem_s_tensor_work() {
    let arch = load_preset("a100-sxm4-80gb").unwrap();
    for sq in [512, 2048] {
        let s = spec(Pass::FwdBwd, sq);
        let t = attention::generate(&s, &arch).unwrap().trace;
        let names: Vec<&str> = t.kernels.iter().map(|k| k.info.name.as_str()).collect();
        let softmax: Vec<usize> =
            names.iter().enumerate().filter(|(_, n)| n.starts_with("softmax")).map(|(i, _)| i).collect();
        assert_eq!(softmax.len(), 2, "{names:?}");
        assert!(names[softmax[0]].starts_with("softmax_forward") && names[softmax[1]].starts_with("softmax_backward"));
        assert!(t.kernels.iter().enumerate().all(|(i, k)| k.info.id == i as u32 && k.info.stream == 0), "{names:?}");
        // Six GEMMs of 2·b·h·s²·d: 3× the forward convention (FA2's backward recomputes S, so its
        // convention counts 3.5×; the unfused backward keeps P and runs four GEMMs).
        assert_eq!(tensor_flops(&t), 3 * s.fwd_flops(), "sq = {sq}: {names:?}");
        for k in &t.kernels {
            k.check().unwrap();
            assert!(k.ops.iter().all(|(_, d)| d.known), "{}", k.info.name);
        }
    }
    // The softmax kernel reads and writes the scores once: one 16-byte vector per 8 elements.
    let t = attention::generate(&spec(Pass::Fwd, 512), &arch).unwrap().trace;
    let sm = t.kernels.iter().find(|k| k.info.name.starts_with("softmax")).unwrap();
    assert_eq!(sm.info.num_ctas(), 2 * 4 * 512 / 4, "one warp per row, 4 rows per CTA");
}

/// Long rows run one 1024-thread CTA per row, compiled for that launch bound: every kernel of a
/// long standard attention fits an SM (8192 columns needed 128 registers × 1024 threads, twice
/// the register file, and could not launch).
#[test]
fn every_kernel_of_a_long_sequence_fits_an_sm() {
    for preset in ["a100-sxm4-80gb", "h100-sxm5-80gb"] {
        let arch = load_preset(preset).unwrap();
        for sq in [4096, 8192, 16384] {
            let s = AttnSpec { batch: 1, heads: 1, ..spec(Pass::FwdBwd, sq) };
            let t = attention::generate(&s, &arch).unwrap().trace;
            for k in &t.kernels {
                let o = gpusim_configs::occupancy::occupancy(&arch, &k.info);
                assert!(o.as_ref().is_ok_and(|o| o.ctas_per_sm >= 1), "{preset} s{sq} `{}`: {o:?}", k.info.name);
            }
        }
    }
}
