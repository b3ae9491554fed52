//! Walking a [`Program`]: the position of one warp in its instruction stream.
//!
//! A cursor is a few words of plain data (no allocation), so the simulator keeps one per warp
//! slot and advances it as the warp issues.

use crate::program::{Inst, Lanes, MAX_LOOP_DEPTH, MAX_PARAMS, NUM_VARS, PARAM_BASE, Program, Step, Var};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LoopFrame {
    /// Index of the `Loop` step.
    start: u32,
    /// Iteration counter (0-based).
    iter: u32,
    count: u32,
}

/// Position in a program plus the loop counters and CTA/warp variables for address evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pc: u32,
    depth: u8,
    frames: [LoopFrame; MAX_LOOP_DEPTH],
    /// Values of `cta.x, cta.y, cta.z, warp` (loop variables are filled in on evaluation).
    fixed: [i64; 4],
    /// Values of the program's parameters `p0..p7` for this CTA and warp.
    params: [i64; MAX_PARAMS],
}

impl Cursor {
    /// A cursor at the start of `prog` for warp `warp` of CTA `cta`; evaluates the program's
    /// per-CTA parameters.
    pub fn new(prog: &Program, cta: [u32; 3], warp: u32) -> Cursor {
        let params = if prog.params.is_empty() { [0; MAX_PARAMS] } else { prog.eval_params(cta, warp) };
        Cursor { fixed: [cta[0] as i64, cta[1] as i64, cta[2] as i64, warp as i64], params, ..Cursor::default() }
    }

    /// The parameter values `p0..p7` (unused ones 0).
    pub fn params(&self) -> &[i64; MAX_PARAMS] {
        &self.params
    }

    /// The next instruction to issue, without moving. Skips loop markers (entering zero-trip
    /// loops skips their body). `None` at the end of the program.
    #[inline]
    pub fn peek<'p>(&mut self, prog: &'p Program) -> Option<&'p Inst> {
        loop {
            match prog.steps.get(self.pc as usize)? {
                Step::Inst(i) => return Some(i),
                Step::Loop { count, end } => {
                    let count = count.resolve(&self.params);
                    if count == 0 {
                        self.pc = end + 1;
                    } else {
                        // Program::check guarantees depth < MAX_LOOP_DEPTH here.
                        let d = self.depth as usize;
                        self.frames[d] = LoopFrame { start: self.pc, iter: 0, count };
                        self.depth += 1;
                        self.pc += 1;
                    }
                }
                Step::EndLoop { .. } => {
                    let d = self.depth as usize - 1;
                    let f = &mut self.frames[d];
                    f.iter += 1;
                    if f.iter < f.count {
                        self.pc = f.start + 1;
                    } else {
                        self.depth -= 1;
                        self.pc += 1;
                    }
                }
            }
        }
    }

    /// Moves past the instruction returned by the last [`Cursor::peek`].
    #[inline]
    pub fn advance(&mut self) {
        self.pc += 1;
    }

    /// The variable values for address evaluation at the current position.
    #[inline]
    pub fn vars(&self) -> [i64; NUM_VARS] {
        let mut v = [0i64; NUM_VARS];
        v[..4].copy_from_slice(&self.fixed);
        v[PARAM_BASE..].copy_from_slice(&self.params);
        for d in 0..self.depth as usize {
            v[Var::Loop(d as u8).index()] = self.frames[d].iter as i64;
        }
        v
    }

    /// The address of each active lane of `inst`'s memory operand, written into `out` by lane
    /// index (inactive lanes are left untouched). Returns false when the instruction has no
    /// memory operand.
    #[inline]
    pub fn lane_addresses(&self, prog: &Program, inst: &Inst, out: &mut [u64; 32]) -> bool {
        let Some(m) = inst.mem else { return false };
        let base = prog.exprs[m.addr as usize].eval(&self.vars());
        let mut mask = inst.mask;
        match m.lanes {
            Lanes::Stride(s) => {
                while mask != 0 {
                    let l = mask.trailing_zeros();
                    out[l as usize] = base.wrapping_add((s as i64 * l as i64) as u64);
                    mask &= mask - 1;
                }
            }
            Lanes::Offsets { start } => {
                let mut k = start as usize;
                while mask != 0 {
                    let l = mask.trailing_zeros();
                    out[l as usize] = base.wrapping_add(prog.lane_offsets[k] as u64);
                    k += 1;
                    mask &= mask - 1;
                }
            }
        }
        true
    }

    /// The evaluated base address of `inst`'s memory operand.
    #[inline]
    pub fn base_address(&self, prog: &Program, inst: &Inst) -> Option<u64> {
        inst.mem.map(|m| prog.exprs[m.addr as usize].eval(&self.vars()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{AddrExpr, Inst, ProgramBuilder};

    #[test]
    fn walks_nested_loops_and_evaluates_addresses() {
        let mut b = ProgramBuilder::new("p");
        b.inst(Inst::new(0));
        b.begin_loop(3).unwrap();
        b.begin_loop(2).unwrap();
        let e = AddrExpr::constant(1000).with(Var::Loop(0), 100).with(Var::Loop(1), 10).with(Var::CtaX, 7);
        b.mem_inst(Inst::new(1), e, Lanes::Stride(4), 0);
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.begin_loop(0).unwrap();
        b.inst(Inst::new(9));
        b.end_loop().unwrap();
        b.inst(Inst::new(2));
        let p = b.finish().unwrap();
        assert_eq!(p.dynamic_len(), 1 + 6 + 1);

        let mut c = Cursor::new(&p, [2, 0, 0], 0);
        let mut seen = Vec::new();
        while let Some(i) = c.peek(&p) {
            let i = *i;
            let mut a = [0u64; 32];
            if c.lane_addresses(&p, &i, &mut a) {
                seen.push((i.op, a[0], a[1]));
            } else {
                seen.push((i.op, 0, 0));
            }
            c.advance();
        }
        let addrs: Vec<u64> = seen.iter().filter(|s| s.0 == 1).map(|s| s.1).collect();
        assert_eq!(addrs, vec![1014, 1024, 1114, 1124, 1214, 1224]);
        assert_eq!(seen.first().unwrap().0, 0);
        assert_eq!(seen.last().unwrap().0, 2);
        assert!(seen.iter().all(|s| s.0 != 9));
        assert_eq!(seen[1].2, seen[1].1 + 4);
    }
}
