//! The KV loop of FlashAttention-3's warp roles (`attention::fa3`, `attention::fa3_bwd`): a
//! tile's KV blocks through 2-stage rings, for a trip count fixed for the grid, a table by CTA or
//! a per-CTA parameter.

use std::sync::Arc;

use gpusim_isa::{CtaParam, Var};

use crate::asm::{Affine, Code};
use crate::params::WorkloadError;

/// Blocks a CTA's loop visits: the same for all, a table by `cta.x` (causal), or a per-CTA
/// parameter the program already has (at least 1 for every CTA).
pub(super) enum Count {
    Fixed(u64),
    Table(Arc<[i64]>),
    Param(Var),
}

/// Emits the KV steps of a tile: `step(j, stage of j)` for j in 1..n, then `last(n−1, its
/// stage)`. Stages alternate (2-stage rings), so steps run in pairs; under a per-CTA count the
/// odd step and the last block run in loops of 0 or 1 iterations of fixed parity.
pub(super) fn kv_steps(
    c: &mut Code,
    count: &Count,
    step: &mut dyn FnMut(&mut Code, &Affine, u64),
    last: &mut dyn FnMut(&mut Code, &Affine, u64),
) -> Result<(), WorkloadError> {
    kv_steps_masked(c, count, 0, &mut |c, j, st, _| step(c, j, st), last)
}

/// [`kv_steps`] with the first `peel` steps (j = 1..=peel) emitted one by one and told they are
/// masked (`step(j, stage, true)`): the causal diagonal's blocks after the prologue's. Every
/// CTA's count must be at least `peel + 1`.
pub(super) fn kv_steps_masked(
    c: &mut Code,
    count: &Count,
    peel: u64,
    step: &mut dyn FnMut(&mut Code, &Affine, u64, bool),
    last: &mut dyn FnMut(&mut Code, &Affine, u64),
) -> Result<(), WorkloadError> {
    for j in 1..=peel {
        step(c, &Affine::konst(j), j % 2, true);
    }
    // The unpeeled steps j = s..n−1; their stages s % 2, (s + 1) % 2, ... alternate.
    let s = peel + 1;
    let (s0, s1) = (s % 2, (s + 1) % 2);
    match count {
        Count::Fixed(n) => {
            if *n < s {
                return Err(WorkloadError(format!("{n} KV blocks, fewer than the {s} the masked steps need")));
            }
            let pairs = (n - s) / 2;
            if pairs > 0 {
                let v = c.begin(pairs as u32);
                step(c, &Affine::konst(s).with(v, 2), s0, false);
                step(c, &Affine::konst(s + 1).with(v, 2), s1, false);
                c.end();
            }
            if (n - s) % 2 == 1 {
                step(c, &Affine::konst(n - 1), (n - 1) % 2, false);
            }
            last(c, &Affine::konst(n - 1), (n - 1) % 2);
        }
        Count::Table(_) | Count::Param(_) => {
            let n = match count {
                Count::Param(n) => *n,
                Count::Table(t) => {
                    if t.iter().any(|&n| (n as u64) < s) {
                        return Err(WorkloadError(format!(
                            "a CTA has fewer than the {s} KV blocks the masked steps need"
                        )));
                    }
                    let tab = c.table(t.clone());
                    c.param(CtaParam { table: Some(tab), ..CtaParam::constant(0).with(Var::CtaX, 1) })
                }
                Count::Fixed(_) => unreachable!("matched above"),
            };
            let pairs = c.param(CtaParam { offset: -(s as i64), div: 2, lo: 0, ..CtaParam::default() }.with(n, 1));
            let odd = c.param(CtaParam::constant(-(s as i64)).with(n, 1).with(pairs, -2));
            let even = c.param(CtaParam::constant(1).with(odd, -1));
            let v = c.begin_param(pairs);
            step(c, &Affine::konst(s).with(v, 2), s0, false);
            step(c, &Affine::konst(s + 1).with(v, 2), s1, false);
            c.end();
            // j = n−1 is s + 2·pairs when `odd` is 1 (stage s0), else s + 2·pairs − 1 (stage s1).
            let j_last = Affine::konst(u64::MAX).with(n, 1);
            c.begin_param(odd);
            step(c, &Affine::konst(s).with(pairs, 2), s0, false);
            last(c, &j_last, s0);
            c.end();
            c.begin_param(even);
            last(c, &j_last, s1);
            c.end();
        }
    }
    Ok(())
}
