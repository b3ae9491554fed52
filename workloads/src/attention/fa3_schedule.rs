//! FlashAttention-3's causal tile schedule (`attention::fa3`'s forward): which tiles each CTA of
//! the causal grid runs, and how many KV blocks a causal tile has.

use super::fa3::Plan;

/// KV blocks of causal m-block `m` (`n_block_max` of FA3 with `n_block_min = 0`).
pub fn causal_blocks(pl: &Plan, sq: u64, sk: u64, m: u64) -> u64 {
    ((m + 1) * pl.bm + sk - sq).min(sk).div_ceil(pl.bn).max(1)
}

/// One causal CTA's tiles: m-block `m` of the (head, batch) indices `hb` (`h + heads·b`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub m: u64,
    pub hb: Vec<u64>,
}

/// The persistent causal grid, FA3's `DynamicPersistentTileScheduler` (a CTA per SM takes tile
/// after tile from an atomic counter, head-major, longest m-block first within a head, and
/// overlaps each tile's Q/K(0) loads with the previous tile's epilogue), within what a program
/// can say: a CTA's KV trip count is fixed per CTA (`Program::check`), so a CTA here walks one
/// m-block over a list of heads (a tile parameter from a table).
///
/// - **Bulk**: each m-block gets CTAs in proportion to its work (KV blocks + 1 per tile for the
///   first QKᵀ and the O store), at least one, `slots` in all; the CTAs of m-block m take heads
///   k, k + G_m, k + 2·G_m, ..., as many as fit 9/10 of a slot's mean work. Every m-block then
///   advances through the heads at about the same rate, so about 2·slots/m_blocks heads are in
///   flight (FA3's order keeps slots/m_blocks): the K/V working set stays what the real kernel's
///   is, which matters (a grid whose in-flight K/V outgrew the L2 ran 10–20% slower).
/// - **Tail**: the tiles left over (the last heads of every m-block, at least a tenth of the
///   work) are single-tile CTAs, longest first, which the hardware's CTA dispatcher hands to
///   whichever SM is free, as the tile counter hands the last tiles out.
///
/// `None` where this does not apply: a grid of at most one tile per slot, more than half as many
/// m-blocks as slots (long sequences: a CTA per m-block could not balance; the one-CTA-per-tile
/// grid is used, where a tile's prologue is a small share of its work), or more than 65,536
/// tiles (the tables would dominate the trace).
pub fn causal_persistent(pl: &Plan, sq: u64, sk: u64) -> Option<Vec<Chunk>> {
    let hbs = pl.heads * pl.batch;
    if pl.tiles <= pl.slots || 2 * pl.m_blocks > pl.slots || pl.tiles > 65536 {
        return None;
    }
    let cost = |m: u64| causal_blocks(pl, sq, sk, m) + 1;
    let per_head: u64 = (0..pl.m_blocks).map(cost).sum();
    let mut gm: Vec<u64> = (0..pl.m_blocks).map(|m| (cost(m) * pl.slots / per_head).clamp(1, hbs)).collect();
    // The remaining slots go, one at a time, to the m-block with the most work per CTA.
    while gm.iter().sum::<u64>() < pl.slots {
        let Some(m) = (0..pl.m_blocks as usize).filter(|&m| gm[m] < hbs).max_by_key(|&m| {
            // Work per CTA, cost·heads/G in millionths (ties: the longer m-block).
            (cost(m as u64) * hbs * 1_000_000 / gm[m], m)
        }) else {
            break;
        };
        gm[m] += 1;
    }
    if gm.iter().sum::<u64>() > pl.slots {
        return None;
    }
    let bulk = hbs * per_head * 9 / (10 * pl.slots);
    let mut chunks = Vec::new();
    let mut tail = Vec::new();
    for m in (0..pl.m_blocks).rev() {
        let g = gm[m as usize];
        let n = (hbs / g).min(bulk / cost(m));
        if n > 0 {
            chunks.extend((0..g).map(|k| Chunk { m, hb: (0..n).map(|i| k + g * i).collect() }));
        }
        tail.extend((g * n..hbs).map(|hb| Chunk { m, hb: vec![hb] }));
    }
    // Longest first; within a length, head-major as the tile counter goes.
    tail.sort_by_key(|ch| (std::cmp::Reverse(cost(ch.m)), ch.hb[0]));
    chunks.extend(tail);
    Some(chunks)
}
