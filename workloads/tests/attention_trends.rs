//! Trends of the FA2 forward on A100, simulated: throughput rises with sequence length and head
//! dim; causal runs below non-causal at short lengths and closes in at long ones. Problems keep
//! the benchmark's shape (a fixed number of tokens per batch) at a size a debug build simulates in
//! seconds.

use gpusim_configs::load_preset;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::{SimOptions, simulate};
use gpusim_workloads::attention::{self, AttnSpec, Recipe};

/// Convention TFLOP/s of the FA2 forward of `tokens` tokens of `seqlen`, 8 heads.
fn tflops(seqlen: u64, headdim: u64, causal: bool, tokens: u64) -> f64 {
    let arch = load_preset("a100-sxm4-80gb").unwrap();
    let s = AttnSpec {
        batch: tokens / seqlen,
        heads: 8,
        seqlen,
        headdim,
        causal,
        recipe: Some(Recipe::Fa2),
        ..AttnSpec::default()
    };
    let a = attention::generate(&s, &arch).unwrap();
    let r = simulate(&arch, &mut MemTraceSource::new(a.trace), &SimOptions::default()).unwrap();
    a.flops as f64 / (r.time_us * 1e-6) / 1e12
}

#[test]
fn throughput_rises_with_sequence_length() {
    let (short, long) = (tflops(256, 64, false, 8192), tflops(1024, 64, false, 8192));
    assert!(long > short * 1.03, "seqlen 256: {short:.1}, 1024: {long:.1} TFLOP/s");
}

#[test]
fn throughput_rises_with_head_dim() {
    let (d64, d128) = (tflops(512, 64, false, 4096), tflops(512, 128, false, 4096));
    assert!(d128 > d64 * 1.03, "d64: {d64:.1}, d128: {d128:.1} TFLOP/s");
}

#[test]
fn causal_is_below_non_causal_and_closes_in_at_long_lengths() {
    let ratio = |s| tflops(s, 64, true, 8192) / tflops(s, 64, false, 8192);
    let (short, long) = (ratio(256), ratio(1024));
    assert!(short < 0.9, "causal/non-causal at 256: {short:.2}");
    assert!(long > short + 0.1 && long < 1.05, "at 256: {short:.2}, at 1024: {long:.2}");
}
