//! Folding a warp's flat instruction list back into loops.
//!
//! An Accel-Sim trace lists every dynamic instruction: a loop of 32 instructions run 128 times
//! is 4,096 lines, and once read, 4,096 steps of the warp's program, about 55 bytes each. Every
//! resident CTA holds its warps' programs, so a chip full of such CTAs needed gigabytes, and the
//! simulator walked megabytes of steps that no host cache held. Folding finds the runs where a
//! body of instructions repeats with the same shape (opcode, operands, mask, PC, lane pattern)
//! and with addresses that advance by a fixed stride per iteration, and writes them as a loop
//! whose addresses are affine in its counter: the program a generator would have written.
//!
//! **Contract.** The folded program issues exactly the instructions of the flat list, in order,
//! with the same addresses for every lane (what [`expand`] checks in the tests, and what the
//! simulator sees through its cursor). Only the innermost level is folded: a loop never
//! contains another, so the address of a body instruction in iteration `k` is `base + k·δ`.
//!
//! **Finding a body.** A loop's iterations start at the same PC, so the candidate body at
//! instruction `i` runs to the next instruction with the PC of `i`; it is folded when at least
//! two consecutive copies match. The work of checking candidates is bounded by a budget
//! proportional to the list's length (see [`fold`]): a list whose PCs recur without repeating
//! bodies (a fuzzer's, say) is left flat rather than compared quadratically.

use std::collections::HashMap;

use crate::program::Inst;

/// One instruction of the flat list: the instruction with its memory operand's expression left
/// at index 0 (the lanes and width filled in), and the base address of its first active lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Flat {
    pub inst: Inst,
    pub base: u64,
}

/// A piece of the folded list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// Instruction `i` of the flat list, on its own.
    One(usize),
    /// Instructions `start..start + len` run `trips` times (`trips ≥ 2`); the address of body
    /// instruction `q` in iteration `k` is that of `start + q` plus `k·δ`, where `δ` is the
    /// difference between its second iteration and its first ([`Piece::delta`]).
    Loop { start: usize, len: usize, trips: u32 },
}

impl Piece {
    /// The per-iteration address stride of body instruction `q` of a loop.
    pub fn delta(flat: &[Flat], start: usize, len: usize, q: usize) -> i64 {
        flat[start + len + q].base.wrapping_sub(flat[start + q].base) as i64
    }
}

/// Longest loop body looked for, in instructions.
pub(super) const MAX_BODY: usize = 1 << 14;

/// Folds `flat` into loops. Compares at most `8·len + MAX_BODY` instruction pairs in all.
pub(super) fn fold(flat: &[Flat]) -> Vec<Piece> {
    let n = flat.len();
    // For each instruction, the next one with the same PC.
    let mut next_same = vec![usize::MAX; n];
    let mut seen: HashMap<u32, usize> = HashMap::new();
    for i in (0..n).rev() {
        if let Some(j) = seen.insert(flat[i].inst.pc, i) {
            next_same[i] = j;
        }
    }
    let mut budget = 8 * n + MAX_BODY;
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let j = next_same[i];
        if j != usize::MAX && j - i <= MAX_BODY && budget > 0 {
            let len = j - i;
            let trips = repeats(flat, i, len, &mut budget);
            if trips >= 2 {
                out.push(Piece::Loop { start: i, len, trips });
                i += trips as usize * len;
                continue;
            }
        }
        out.push(Piece::One(i));
        i += 1;
    }
    out
}

/// How many consecutive copies of the body `start..start + len` begin at `start` (1 when the
/// second does not match), taking the compared pairs from `budget`.
fn repeats(flat: &[Flat], start: usize, len: usize, budget: &mut usize) -> u32 {
    let mut trips: u32 = 1;
    while trips < u32::MAX {
        let at = start + trips as usize * len;
        if at + len > flat.len() {
            break;
        }
        let k = trips as u64;
        let same = (0..len).all(|q| {
            *budget = budget.saturating_sub(1);
            let (a, b) = (&flat[start + q], &flat[at + q]);
            a.inst == b.inst
                && (a.inst.mem.is_none()
                    || b.base == a.base.wrapping_add(k.wrapping_mul(Piece::delta(flat, start, len, q) as u64)))
        });
        if !same {
            break;
        }
        trips += 1;
        if *budget == 0 {
            break;
        }
    }
    trips
}

/// The flat list the pieces stand for: each instruction and its base address (test oracle).
#[cfg(test)]
pub(super) fn expand(flat: &[Flat], pieces: &[Piece]) -> Vec<Flat> {
    let mut out = Vec::new();
    for p in pieces {
        match *p {
            Piece::One(i) => out.push(flat[i]),
            Piece::Loop { start, len, trips } => {
                for k in 0..trips as u64 {
                    for q in 0..len {
                        let mut f = flat[start + q];
                        if f.inst.mem.is_some() {
                            f.base = f.base.wrapping_add(k.wrapping_mul(Piece::delta(flat, start, len, q) as u64));
                        }
                        out.push(f);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Lanes, MemRef};

    fn inst(pc: u32, op: u16, mem: bool) -> Inst {
        let mut i = Inst::new(op);
        i.pc = pc;
        if mem {
            i.mem = Some(MemRef { addr: 0, lanes: Lanes::Stride(4), bulk_bytes: 0 });
        }
        i
    }

    fn flat(pc: u32, op: u16, base: Option<u64>) -> Flat {
        Flat { inst: inst(pc, op, base.is_some()), base: base.unwrap_or(0) }
    }

    #[test]
    fn a_loop_with_strided_addresses_folds_and_expands_back() {
        let mut f = vec![flat(0, 1, None), flat(0x10, 2, None)];
        for k in 0..100u64 {
            f.push(flat(0x20, 3, None));
            f.push(flat(0x30, 4, Some(0x1000 + 128 * k)));
            f.push(flat(0x40, 5, Some(0x9000)));
            f.push(flat(0x50, 6, None));
        }
        f.push(flat(0x60, 7, None));
        let p = fold(&f);
        assert_eq!(
            p,
            vec![Piece::One(0), Piece::One(1), Piece::Loop { start: 2, len: 4, trips: 100 }, Piece::One(402)]
        );
        assert_eq!(expand(&f, &p), f);
    }

    #[test]
    fn an_address_off_the_stride_ends_the_loop() {
        let mut f = Vec::new();
        for k in 0..10u64 {
            let b = if k == 6 { 0x5 } else { 0x1000 + 64 * k };
            f.push(flat(0x20, 3, Some(b)));
            f.push(flat(0x30, 4, None));
        }
        let p = fold(&f);
        assert_eq!(p[0], Piece::Loop { start: 0, len: 2, trips: 6 });
        assert_eq!(expand(&f, &p), f);
    }

    /// Random lists built from repeated bodies with noise (changed operands, addresses off the
    /// stride, partial iterations, recurring PCs without repetition) expand back to themselves.
    #[test]
    fn random_lists_expand_back_to_themselves() {
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n.max(1)
        };
        for case in 0..2_000 {
            let mut f = Vec::new();
            while f.len() < 300 {
                let len = 1 + next(6) as usize;
                let trips = 1 + next(8);
                let pc0 = (next(8) * 16) as u32;
                let stride = next(3) * 64;
                for k in 0..trips {
                    for q in 0..len {
                        let mem = q % 2 == 1;
                        let mut base = 0x4000 + q as u64 * 0x100 + k * stride;
                        if next(30) == 0 {
                            base += 8;
                        }
                        let op = if next(40) == 0 { 9 } else { q as u16 };
                        f.push(flat(pc0 + 16 * q as u32, op, mem.then_some(base)));
                    }
                }
            }
            let p = fold(&f);
            assert_eq!(expand(&f, &p), f, "case {case}");
        }
    }

    #[test]
    fn recurring_pcs_without_repeats_stay_within_the_budget() {
        // Every PC recurs once, far away, with a different instruction: nothing folds, and the
        // comparisons stop at the first mismatch of each candidate.
        let n = 20_000;
        let f: Vec<Flat> = (0..n).map(|i| flat((i % (n / 2)) as u32, (i / (n / 2)) as u16, None)).collect();
        let p = fold(&f);
        assert_eq!(p.len(), n);
        assert_eq!(expand(&f, &p), f);
    }
}
