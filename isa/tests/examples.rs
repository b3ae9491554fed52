//! The shipped examples (examples/*.trace) read, round-trip, and model what their headers say.

use std::collections::HashMap;

use gpusim_isa::{Cursor, KernelTrace, Trace, binary, text};

fn example(name: &str) -> Trace {
    let path = format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).unwrap();
    let t = text::read_trace(&path, &src).unwrap_or_else(|e| panic!("{e}"));
    for k in &t.kernels {
        k.check().unwrap();
    }
    // Both forms read back equal, and the text form is stable.
    let txt = text::to_string(&t).unwrap();
    assert_eq!(text::read_trace("again", &txt).unwrap(), t);
    assert_eq!(binary::read_trace("bin", &binary::to_bytes(&t).unwrap()).unwrap(), t);
    t
}

/// Walks every warp of every CTA: calls `f(mnemonic, active mask, lane addresses)` per issued
/// instruction.
fn walk(k: &KernelTrace, mut f: impl FnMut(u64, u32, &str, u32, Option<&[u64; 32]>)) {
    for c in 0..k.info.num_ctas() {
        let cta = k.cta(c);
        for (w, p) in cta.warps.iter().enumerate() {
            let mut cur = Cursor::new(p, cta.coord.as_array(), w as u32);
            let mut addrs = [0u64; 32];
            while let Some(i) = cur.peek(p) {
                let i = *i;
                let has = cur.lane_addresses(p, &i, &mut addrs);
                f(c, w as u32, &k.ops.get(i.op).mnemonic, i.mask, has.then_some(&addrs));
                cur.advance();
            }
        }
    }
}

#[test]
fn ffma_bound_is_fp32_work() {
    let t = example("ffma_bound.trace");
    let k = &t.kernels[0];
    // Every CTA runs the same program on every warp: count one warp, scale by the warp count.
    assert!(k.layout.overrides.is_empty() && k.layout.default.iter().all(|&p| p == 0));
    let mut one = k.clone();
    one.info.grid = gpusim_isa::Dim3::new(1, 1, 1);
    one.layout.default.truncate(1);
    one.info.block = gpusim_isa::Dim3::new(32, 1, 1);
    let mut counts: HashMap<String, u64> = HashMap::new();
    walk(&one, |_, _, m, _, _| *counts.entry(m.to_string()).or_default() += 1);
    assert_eq!(counts["FFMA"] * k.info.num_ctas() * 4, 1024 * 4 * 128 * 32);
    let total: u64 = counts.values().sum();
    assert!(counts["FFMA"] * 100 / total >= 98, "{counts:?}");
    // 8 independent chains: each FFMA of the loop body accumulates into its own destination.
    let p = &k.programs[0];
    let dsts: std::collections::BTreeSet<_> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            gpusim_isa::Step::Inst(i) if k.ops.get(i.op).mnemonic == "FFMA" => Some(i.dst[0].first),
            _ => None,
        })
        .collect();
    assert_eq!(dsts.len(), 8);
}

#[test]
fn stream_copy_moves_64_mib_once() {
    let t = example("stream_copy.trace");
    let k = &t.kernels[0];
    const SRC: u64 = 0x7f00_0000_0000;
    const DST: u64 = 0x7f00_0400_0000;
    const N: usize = 64 << 20;
    let mut read = vec![false; N / 16];
    let mut written = vec![false; N / 16];
    walk(k, |_, _, m, mask, addrs| {
        let Some(a) = addrs else { return };
        assert_eq!(mask, u32::MAX);
        // Coalesced: lane l at base + 16 l.
        assert!((0..32).all(|l| a[l] == a[0] + 16 * l as u64), "{m}");
        let (base, seen) = if m.starts_with("LDG") { (SRC, &mut read) } else { (DST, &mut written) };
        for x in a {
            let off = (x - base) as usize;
            assert!(off < N && off.is_multiple_of(16));
            assert!(!std::mem::replace(&mut seen[off / 16], true), "{m} touches {x:#x} twice");
        }
    });
    assert!(read.iter().all(|&b| b) && written.iter().all(|&b| b));
}

#[test]
fn barrier_divergence_is_consistent() {
    let t = example("barrier_divergence.trace");
    let k = &t.kernels[0];
    assert_eq!(k.layout.overrides.len(), 1);
    let mut bars: HashMap<(u64, u32), u32> = HashMap::new();
    let mut partial = 0u64;
    let smem = k.info.smem_bytes as u64;
    walk(k, |cta, w, m, mask, addrs| {
        if m.starts_with("BAR.SYNC") {
            *bars.entry((cta, w)).or_default() += 1;
        }
        if mask != u32::MAX {
            partial += 1;
        }
        if (m.starts_with("LDS") || m.starts_with("STS"))
            && let Some(a) = addrs
        {
            let mut mk = mask;
            while mk != 0 {
                let l = mk.trailing_zeros() as usize;
                assert!(a[l] + 4 <= smem, "{m} at {:#x} is outside shared memory", a[l]);
                mk &= mk - 1;
            }
        }
    });
    // Every warp of every CTA waits at the same 16 barriers, or the CTA would deadlock.
    assert_eq!(bars.len(), 128 * 8);
    assert!(bars.values().all(|&n| n == 16));
    assert!(partial > 0);
    assert_eq!(k.cta(0).warps[0].name, "leader");
    assert_eq!(k.cta(1).warps[0].name, "even");
    assert_eq!(k.cta(1).warps[4].name, "odd");
}
