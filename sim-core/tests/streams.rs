//! Kernels of several streams run concurrently and share the SMs; a kernel that waits for a
//! dependency holds back nothing but its dependents.

mod common;

use common::*;
use gpusim_isa::KernelTrace;
use gpusim_sim_core::Report;

/// One CTA per SM: 200 KiB of shared memory each.
fn one_per_sm(mut k: KernelTrace) -> KernelTrace {
    k.info.smem_bytes = 200 * 1024;
    k
}

fn total(r: &Report) -> f64 {
    r.total_cycles as f64
}

#[test]
fn two_kernels_on_half_the_sms_each_take_the_time_of_one() {
    let a = arch(8);
    let one = run(&a, vec![one_per_sm(ffma_kernel(0, 0, 4, 2000))]);
    let two = run(&a, vec![one_per_sm(ffma_kernel(0, 0, 4, 2000)), one_per_sm(ffma_kernel(1, 1, 4, 2000))]);
    let ratio = total(&two) / total(&one);
    assert!((0.95..1.1).contains(&ratio), "one {} cycles, two streams {} cycles", total(&one), total(&two));
    // They overlap: the second starts before the first ends.
    assert!(two.kernels[1].start_cycle < two.kernels[0].end_cycle, "{:?}", two.streams);
    assert_eq!(two.streams.len(), 2);
    assert!(two.streams.iter().all(|s| s.kernels == 1 && s.busy_cycles > 0));
    // On one stream the same two kernels run one after the other.
    let serial = run(&a, vec![one_per_sm(ffma_kernel(0, 0, 4, 2000)), one_per_sm(ffma_kernel(1, 0, 4, 2000))]);
    assert!(total(&serial) > 1.9 * total(&one), "serial {} vs one {}", total(&serial), total(&one));
    assert!(serial.kernels[1].start_cycle >= serial.kernels[0].end_cycle);
    assert_eq!(serial.critical_path, vec![0, 1]);
}

#[test]
fn two_kernels_that_each_fill_the_gpu_take_about_the_sum() {
    let a = arch(4);
    let one = run(&a, vec![one_per_sm(ffma_kernel(0, 0, 16, 1000))]);
    let two = run(&a, vec![one_per_sm(ffma_kernel(0, 0, 16, 1000)), one_per_sm(ffma_kernel(1, 1, 16, 1000))]);
    let ratio = total(&two) / total(&one);
    assert!((1.9..2.1).contains(&ratio), "one {} cycles, two streams {} cycles", total(&one), total(&two));
}

#[test]
fn a_kernel_waiting_for_a_dependency_does_not_hold_back_another_stream() {
    let a = arch(8);
    // Stream 0: a long kernel on half the SMs, then one that waits for it. Stream 1, later in
    // the trace: an independent kernel.
    let long = one_per_sm(ffma_kernel(0, 0, 4, 20_000));
    let waits = one_per_sm(ffma_kernel(1, 0, 4, 1000));
    let other = one_per_sm(ffma_kernel(2, 1, 4, 1000));
    let r = run(&a, vec![long, waits, other]);
    let (k0, k1, k2) = (&r.kernels[0], &r.kernels[1], &r.kernels[2]);
    assert!(k1.start_cycle >= k0.end_cycle, "the dependent kernel waits: {k1:?}");
    assert!(
        k2.end_cycle < k0.end_cycle,
        "stream 1 ran beside kernel 0: k2 {}..{}, k0 ends {}",
        k2.start_cycle,
        k2.end_cycle,
        k0.end_cycle
    );
    assert_eq!(k2.start_cycle, 0, "nothing held kernel 2 back");
    assert_eq!(r.critical_path, vec![0, 1]);

    // An explicit dependency across streams: kernel 2 (stream 1) after kernel 0.
    let mut other = one_per_sm(ffma_kernel(2, 1, 4, 1000));
    other.info.deps = vec![0];
    let long = one_per_sm(ffma_kernel(0, 0, 4, 20_000));
    let waits = one_per_sm(ffma_kernel(1, 0, 4, 1000));
    let r = run(&a, vec![long, waits, other]);
    assert!(r.kernels[2].start_cycle >= r.kernels[0].end_cycle);
}

#[test]
fn many_kernels_on_many_streams_all_run_once() {
    // 40 kernels over 5 streams with cross-stream deps: every CTA runs exactly once and each
    // kernel starts after its predecessors end.
    let a = arch(4);
    let mut ks = Vec::new();
    for i in 0..40u32 {
        let mut k = ffma_kernel(i, i % 5, 1 + i % 7, 100 + 10 * i);
        if i >= 7 && i % 3 == 0 {
            k.info.deps = vec![i - 7];
        }
        ks.push(k);
    }
    let expect: Vec<(u32, u64)> = ks.iter().map(|k| (k.info.id, k.info.num_ctas())).collect();
    let r = run(&a, ks.clone());
    for (k, (id, ctas)) in r.kernels.iter().zip(expect) {
        assert_eq!((k.id, k.ctas), (id, ctas));
        let i = id as usize;
        if i >= 5 {
            assert!(k.start_cycle >= r.kernels[i - 5].end_cycle, "stream order of kernel {i}");
        }
        if let Some(&d) = ks[i].info.deps.first() {
            assert!(k.start_cycle >= r.kernels[d as usize].end_cycle, "dependency of kernel {i}");
        }
    }
    assert_eq!(r.streams.len(), 5);
}
