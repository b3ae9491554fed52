//! An observer sees every kernel and every CTA of a run once, at the cycles the report gives.

mod common;

use std::collections::BTreeMap;

use common::*;
use gpusim_isa::{Dim3, KernelInfo, MemTraceSource, Trace};
use gpusim_sim_core::{CtaEvent, Observer, SimOptions, SmSample, simulate, simulate_observed};

#[derive(Default)]
struct Counting {
    starts: BTreeMap<u32, u64>,
    ends: BTreeMap<u32, u64>,
    launched: BTreeMap<(u32, [u32; 3]), Vec<CtaEvent>>,
    retired: BTreeMap<(u32, [u32; 3]), Vec<CtaEvent>>,
    samples: Vec<(u64, Vec<SmSample>)>,
    last_cycle: u64,
    out_of_order: u32,
}

impl Counting {
    fn at(&mut self, cycle: u64) {
        if cycle < self.last_cycle {
            self.out_of_order += 1;
        }
        self.last_cycle = cycle;
    }
}

impl Observer for Counting {
    fn kernel_start(&mut self, k: &KernelInfo, cycle: u64) {
        assert!(self.starts.insert(k.id, cycle).is_none(), "kernel {} started twice", k.id);
    }
    fn kernel_end(&mut self, k: &KernelInfo, cycle: u64) {
        assert!(self.ends.insert(k.id, cycle).is_none(), "kernel {} ended twice", k.id);
    }
    fn cta_launch(&mut self, e: &CtaEvent) {
        self.at(e.cycle);
        self.launched.entry((e.kernel, e.cta.as_array())).or_default().push(*e);
    }
    fn cta_retire(&mut self, e: &CtaEvent) {
        self.at(e.cycle);
        self.retired.entry((e.kernel, e.cta.as_array())).or_default().push(*e);
    }
    fn sample_interval(&self) -> Option<u64> {
        Some(500)
    }
    fn sample(&mut self, cycle: u64, sms: &[SmSample]) {
        self.samples.push((cycle, sms.to_vec()));
    }
}

fn trace() -> Trace {
    let a = |id: u32, stream: u32, ctas: u32, n: u32| {
        let mut k = ffma_kernel(id, stream, ctas, n);
        k.info.grid = Dim3::new(ctas, 2, 1);
        k
    };
    Trace { kernels: vec![a(0, 0, 9, 700), a(1, 1, 5, 300), a(2, 0, 12, 400)] }
}

#[test]
fn a_counting_observer_sees_every_cta_once_at_the_reported_cycles() {
    let arch = arch(4);
    let t = trace();
    let mut obs = Counting::default();
    let r = simulate_observed(&arch, &mut MemTraceSource::new(t.clone()), &SimOptions::default(), &mut obs).unwrap();
    assert_eq!(obs.out_of_order, 0, "events come in time order");
    for k in &t.kernels {
        let rk = &r.kernels[k.info.id as usize];
        assert_eq!(obs.starts[&k.info.id], rk.start_cycle);
        assert_eq!(obs.ends[&k.info.id], rk.end_cycle);
        let mut last_retire = 0;
        for linear in 0..k.info.num_ctas() {
            let c = k.info.grid.unlinear(linear).as_array();
            let l = &obs.launched[&(k.info.id, c)];
            let d = &obs.retired[&(k.info.id, c)];
            assert_eq!((l.len(), d.len()), (1, 1), "CTA {c:?} of kernel {} once each", k.info.id);
            assert_eq!(l[0].sm, d[0].sm, "a CTA retires where it ran");
            assert!(l[0].cycle >= rk.start_cycle && d[0].cycle > l[0].cycle && d[0].cycle <= rk.end_cycle);
            last_retire = last_retire.max(d[0].cycle);
        }
        assert_eq!(last_retire, rk.end_cycle, "the last retirement is the kernel's end");
    }
    let ctas: u64 = t.kernels.iter().map(|k| k.info.num_ctas()).sum();
    assert_eq!(obs.launched.len() as u64, ctas);
    assert_eq!(obs.retired.len() as u64, ctas);

    // Samples every 500 cycles up to the end, with monotone instruction counts that end at the
    // run's total.
    let end = r.kernels.iter().map(|k| k.end_cycle).max().unwrap();
    assert_eq!(obs.samples.len() as u64, (end - 1) / 500);
    for (i, (cycle, sms)) in obs.samples.iter().enumerate() {
        assert_eq!(*cycle, 500 * (i as u64 + 1));
        assert_eq!(sms.len(), 4);
    }
    for w in obs.samples.windows(2) {
        for (a, b) in w[0].1.iter().zip(&w[1].1) {
            assert!(b.warp_instructions >= a.warp_instructions);
        }
    }
    let sampled: u64 = obs.samples.last().unwrap().1.iter().map(|s| s.warp_instructions).sum();
    assert!(sampled <= r.warp_instructions && sampled > 0);

    // Observing changes nothing.
    let plain = simulate(&arch, &mut MemTraceSource::new(t), &SimOptions::default()).unwrap();
    assert_eq!(plain, r);
}
