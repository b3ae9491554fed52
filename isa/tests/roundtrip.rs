//! Random traces survive in-memory → text → in-memory, in-memory → binary → in-memory and
//! text → binary → text unchanged, and the streaming readers yield what the collecting readers do.

mod common;

use gpusim_isa::{KernelTrace, Trace, TraceSource, binary, text};
use proptest::prelude::*;

/// Streams a trace and rebuilds, per kernel, each CTA's list of program names and step counts.
fn streamed(src: &mut dyn TraceSource) -> Vec<Vec<Vec<(String, usize)>>> {
    let mut out = Vec::new();
    while let Some(mut k) = src.next_kernel().unwrap() {
        let mut ctas = Vec::new();
        while let Some(c) = k.next_cta().unwrap() {
            ctas.push(c.warps.iter().map(|p| (p.name.clone(), p.steps.len())).collect());
        }
        out.push(ctas);
    }
    out
}

fn expected(t: &Trace) -> Vec<Vec<Vec<(String, usize)>>> {
    let per_kernel = |k: &KernelTrace| {
        (0..k.info.num_ctas())
            .map(|c| k.cta(c).warps.iter().map(|p| (p.name.clone(), p.steps.len())).collect())
            .collect()
    };
    t.kernels.iter().map(per_kernel).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn round_trips(tape in prop::collection::vec(any::<u32>(), 0..1500)) {
        let trace = common::trace(&mut common::Tape::new(&tape));
        for k in &trace.kernels {
            k.check().unwrap();
        }

        let t1 = text::to_string(&trace).unwrap();
        let from_text = text::read_trace("t1", &t1).map_err(|e| TestCaseError::fail(format!("{e}\n{t1}")))?;
        prop_assert_eq!(&from_text, &trace, "text:\n{}", t1);

        let b = binary::to_bytes(&trace).unwrap();
        let from_bin = binary::read_trace("b", &b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&from_bin, &trace);

        let via_bin = binary::read_trace("b2", &binary::to_bytes(&from_text).unwrap()).unwrap();
        let t2 = text::to_string(&via_bin).unwrap();
        prop_assert_eq!(&t1, &t2);

        let want = expected(&trace);
        prop_assert_eq!(&streamed(&mut text::TextReader::from_reader("s", t1.as_bytes())), &want);
        prop_assert_eq!(&streamed(&mut binary::BinaryReader::from_reader("s", &b[..])), &want);
    }
}

/// The generator does produce version-2 content (so the round trip above exercises it).
#[test]
fn generator_makes_params_tables_and_param_loops() {
    let (mut params, mut tables, mut loops) = (0, 0, 0);
    for seed in 0..200u32 {
        let tape: Vec<u32> = (0..1500u32)
            .map(|i| i.wrapping_mul(2654435761).wrapping_add(seed.wrapping_mul(40503)) ^ (i >> 3))
            .collect();
        let trace = common::trace(&mut common::Tape::new(&tape));
        for p in trace.kernels.iter().flat_map(|k| k.programs.iter()) {
            params += p.params.len();
            tables += p.tables.len();
            loops += p.has_param_loops() as usize;
        }
    }
    assert!(params > 0 && tables > 0 && loops > 0, "params {params} tables {tables} param loops {loops}");
}
