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
