//! MoE layers simulated: skewed routing makes a straggler, shared experts on a second stream
//! overlap the routed experts.

use gpusim_configs::load_preset;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::{Report, SimOptions, simulate};
use gpusim_workloads::moe::*;

fn run(l: &MoeLayer) -> (Report, LayerTrace) {
    let arch = load_preset("h800-sxm5").unwrap();
    let lt = generate_layer(&arch, l).unwrap();
    let r = simulate(&arch, &mut MemTraceSource::new(lt.trace.clone()), &SimOptions::default()).unwrap();
    (r, lt)
}

fn small(routing: Routing) -> MoeLayer {
    MoeLayer {
        tokens: 512,
        experts: 16,
        topk: 2,
        hidden: 1024,
        intermediate: 512,
        routing,
        seed: 3,
        ..MoeLayer::default()
    }
}

/// Cycles of the kernels of `role`.
fn role_cycles(r: &Report, lt: &LayerTrace, role: &str) -> u64 {
    lt.roles.iter().filter(|(_, x)| *x == role).map(|(id, _)| r.kernels[*id as usize].cycles).sum()
}

#[test]
fn zipf_routing_is_slower_than_uniform_for_the_same_tokens() {
    let (u, ul) = run(&small(Routing::Uniform));
    let (z, zl) = run(&small(Routing::Zipf(1.2)));
    let busiest = |lt: &LayerTrace| *lt.counts.iter().max().unwrap();
    assert!(busiest(&zl) > busiest(&ul), "{:?} vs {:?}", zl.counts, ul.counts);
    assert!(z.total_cycles > u.total_cycles, "zipf {} vs uniform {} cycles", z.total_cycles, u.total_cycles);
    // The expert GEMMs are where the time goes.
    for role in ["gate_up", "down"] {
        assert!(role_cycles(&z, &zl, role) > role_cycles(&u, &ul, role), "{role}");
    }
    // The report names the straggler: the expert with the most tokens did the most CTA work,
    // in each expert GEMM and over the layer, and the skew shows as imbalance.
    let top = |lt: &LayerTrace| {
        let m = *lt.counts.iter().max().unwrap();
        lt.counts.iter().position(|&c| c == m).unwrap() as i64
    };
    let expert_kernels: Vec<u32> =
        zl.roles.iter().filter(|(_, x)| matches!(*x, "gate_up" | "down")).map(|(id, _)| *id).collect();
    for &id in &expert_kernels {
        let g = z.kernels[id as usize].groups.as_ref().expect("expert GEMMs group their CTAs by expert");
        assert_eq!(g.name, "expert");
        assert_eq!(g.busiest, top(&zl), "kernel {id}: {g:?} for counts {:?}", zl.counts);
        let ctas: u64 = g.groups.iter().map(|x| x.ctas).sum();
        assert_eq!(ctas, z.kernels[id as usize].ctas, "every CTA is in a group");
    }
    let [zs] = &z.cta_groups[..] else { panic!("one grouping: {:?}", z.cta_groups) };
    let [us] = &u.cta_groups[..] else { panic!("one grouping: {:?}", u.cta_groups) };
    assert_eq!(zs.kernels, expert_kernels);
    assert_eq!(zs.busiest, top(&zl));
    assert_eq!(zs.groups, zl.counts.iter().filter(|&&c| c > 0).count() as u64);
    assert!(zs.imbalance > 2.0 * us.imbalance, "zipf {zs:?} vs uniform {us:?}");
    assert!(zs.busiest_share_pct > 2.0 * us.busiest_share_pct);
    // Kernels without CTA groups report none.
    assert!(lt_roles_without_groups(&z, &zl));
}

fn lt_roles_without_groups(r: &Report, lt: &LayerTrace) -> bool {
    lt.roles.iter().filter(|(_, x)| !matches!(*x, "gate_up" | "down")).all(|(id, _)| r.kernels[*id as usize].groups.is_none())
}

#[test]
fn shared_experts_on_a_second_stream_overlap_the_routed_experts() {
    let decode = MoeLayer { tokens: 16, shared_experts: 1, ..small(Routing::Uniform) };
    let (r, _) = run(&decode);
    assert_eq!(r.streams.len(), 2, "{:?}", r.streams);
    let (s0, s1) = (&r.streams[0], &r.streams[1]);
    assert!(s1.first_cycle < s0.last_cycle && s0.first_cycle < s1.last_cycle, "{s0:?} {s1:?}");
    // Overlap: the layer takes less than the two streams' busy times one after the other.
    assert!(r.total_cycles < s0.busy_cycles + s1.busy_cycles, "{} vs {s0:?} {s1:?}", r.total_cycles);
}
