//! Routing (counts per expert: deterministic, distinct experts per token, skew) and the MoE
//! layer's trace (a DAG in trace order, streams, compactness at DeepSeek-V3 size).

use gpusim_configs::load_preset;
use gpusim_isa::binary;
use gpusim_workloads::gemm::grouped::Layout;
use gpusim_workloads::moe::*;

fn layer(tokens: u64, experts: u64, topk: u64) -> MoeLayer {
    MoeLayer { tokens, experts, topk, hidden: 1024, intermediate: 512, ..MoeLayer::default() }
}

#[test]
fn routing_is_deterministic_and_every_token_picks_distinct_experts() {
    for r in [Routing::Uniform, Routing::Zipf(1.2)] {
        let a = expert_counts(1000, 64, 8, &r, 7).unwrap();
        assert_eq!(a, expert_counts(1000, 64, 8, &r, 7).unwrap(), "{r}");
        assert_ne!(a, expert_counts(1000, 64, 8, &r, 8).unwrap(), "{r}: the seed matters");
        assert_eq!(a.iter().sum::<u64>(), 8000, "{r}");
        // No expert can get a token twice: at most one pick per token.
        assert!(a.iter().all(|&n| n <= 1000), "{r}: {a:?}");
    }
    // top-k = experts: every expert gets every token.
    assert_eq!(expert_counts(50, 4, 4, &Routing::Zipf(3.0), 1).unwrap(), vec![50; 4]);
    let max = |r: &Routing| *expert_counts(4096, 256, 8, r, 0).unwrap().iter().max().unwrap();
    let (u, z) = (max(&Routing::Uniform), max(&Routing::Zipf(1.2)));
    assert!(u < 200, "uniform: busiest {u} (mean 128)");
    assert!(z > 2 * u, "zipf 1.2 busiest {z} vs uniform {u}");
}

#[test]
fn explicit_counts_are_checked() {
    assert_eq!(parse_counts("3, 1\n# c\n0 4").unwrap(), vec![3, 1, 0, 4]);
    assert!(parse_counts("3 x").unwrap_err().contains("line 1"));
    let c = Routing::Counts(vec![3, 1, 0, 4]);
    assert_eq!(expert_counts(4, 4, 2, &c, 0).unwrap(), vec![3, 1, 0, 4]);
    assert!(expert_counts(5, 4, 2, &c, 0).unwrap_err().contains("sum to 8"));
    assert!(expert_counts(4, 3, 2, &c, 0).unwrap_err().contains("4 token counts"));
    assert!(expert_counts(3, 4, 3, &Routing::Counts(vec![4, 3, 1, 1]), 0).unwrap_err().contains("more than"));
    assert!(Routing::parse("zipf:0").is_err() && Routing::parse("poisson").is_err());
    assert_eq!(Routing::parse("list:1,2").unwrap(), Routing::Counts(vec![1, 2]));
}

#[test]
fn the_layer_is_a_dag_in_trace_order_with_shared_experts_on_stream_1() {
    let arch = load_preset("h800-sxm5").unwrap();
    for recipe in [MoeRecipe::Fused, MoeRecipe::DeepGemm] {
        let l = MoeLayer { shared_experts: 1, recipe, ..layer(64, 16, 2) };
        let lt = generate_layer(&arch, &l).unwrap();
        let roles: Vec<&str> = lt.roles.iter().map(|(_, r)| *r).collect();
        for want in ["router", "topk", "permute", "gate_up", "activation", "down", "combine", "shared_down"] {
            assert!(roles.contains(&want), "{recipe:?}: {roles:?}");
        }
        for (i, k) in lt.trace.kernels.iter().enumerate() {
            k.check().unwrap();
            assert_eq!(k.info.id as usize, i);
            let shared = lt.roles[i].1.starts_with("shared");
            assert_eq!(k.info.stream, u32::from(shared), "{}", k.info.name);
        }
        let combine = lt.roles.iter().find(|(_, r)| *r == "combine").unwrap().0 as usize;
        let deps = &lt.trace.kernels[combine].info.deps;
        assert_eq!(deps.len(), 2, "combine waits for the routed and the shared down GEMMs: {deps:?}");
    }
    let masked = MoeLayer { layout: Layout::Masked, ..layer(64, 16, 2) };
    assert!(generate_layer(&arch, &masked).is_ok());
    let bad = MoeLayer { layout: Layout::Masked, recipe: MoeRecipe::Fused, ..layer(64, 16, 2) };
    assert!(generate_layer(&arch, &bad).unwrap_err().contains("masked"));
    assert!(generate_layer(&arch, &layer(8, 4, 5)).unwrap_err().contains("topk"));
}

#[test]
fn a_deepseek_v3_sized_layer_traces_in_under_2_mb() {
    // Both recipes, even and skewed routing, in the text form (the larger) and the binary one.
    // (The text form of the fused layer was 2.5 MB while the Hopper producer had one program per
    // multicast rank and a layout override for every CTA of rank 1.)
    let arch = load_preset("h800-sxm5").unwrap();
    for recipe in [MoeRecipe::DeepGemm, MoeRecipe::Fused] {
        for routing in [Routing::Uniform, Routing::Zipf(1.2)] {
            let l = MoeLayer { recipe, routing: routing.clone(), ..MoeLayer::default() };
            let lt = generate_layer(&arch, &l).unwrap();
            let bytes = binary::to_bytes(&lt.trace).unwrap();
            let text = gpusim_isa::text::to_string(&lt.trace).unwrap();
            eprintln!("DeepSeek-V3 layer {recipe:?} {routing}: {} B binary, {} B text", bytes.len(), text.len());
            assert!(
                bytes.len() < 2 << 20 && text.len() < 2 << 20,
                "{recipe:?} {routing}: {} / {} B",
                bytes.len(),
                text.len()
            );
            assert_eq!(lt.counts.len(), 256);
        }
    }
}
