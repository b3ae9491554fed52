//! What skipped work adds exactly: the instruction, op, pipe and FLOP counts of skipped CTAs
//! and iterations ([`Skipped`]), counted once per program and parameters ([`SkipMemo`]).

use std::sync::Arc;

use gpusim_isa::program::MAX_PARAMS;
use gpusim_isa::{Inst, LoopNest, Program};

use crate::kernel_run::KernelRun;

/// Exact counts of the skipped CTAs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Skipped {
    pub(super) ctas: u64,
    pub(super) warp_insts: u64,
    pub(super) thread_insts: u64,
    pub(super) op_counts: Vec<u64>,
    pub(super) pipe_busy: [u64; gpusim_isa::UnitClass::ALL.len()],
    pub(super) cuda_core_flops: u64,
    pub(super) tensor_flops: u64,
}

impl Skipped {
    pub(super) fn add(&mut self, o: &Skipped) {
        self.ctas += o.ctas;
        self.warp_insts += o.warp_insts;
        self.thread_insts += o.thread_insts;
        if self.op_counts.len() < o.op_counts.len() {
            self.op_counts.resize(o.op_counts.len(), 0);
        }
        for (a, b) in self.op_counts.iter_mut().zip(&o.op_counts) {
            *a += b;
        }
        for (a, b) in self.pipe_busy.iter_mut().zip(&o.pipe_busy) {
            *a += b;
        }
        self.cuda_core_flops += o.cuda_core_flops;
        self.tensor_flops += o.tensor_flops;
    }

    /// `n` executions of `inst` of kernel `k` skipped.
    pub(super) fn count(&mut self, k: &KernelRun, inst: &Inst, n: u64) {
        let Some(t) = k.timing.get(inst.op as usize) else { return };
        if self.op_counts.len() < k.timing.len() {
            self.op_counts.resize(k.timing.len(), 0);
        }
        let lanes = inst.mask.count_ones() as u64;
        self.warp_insts = self.warp_insts.saturating_add(n);
        self.thread_insts = self.thread_insts.saturating_add(n.saturating_mul(lanes));
        self.op_counts[inst.op as usize] = self.op_counts[inst.op as usize].saturating_add(n);
        let busy = &mut self.pipe_busy[t.class.index()];
        *busy = busy.saturating_add(n.saturating_mul(t.interval as u64));
        self.cuda_core_flops =
            self.cuda_core_flops.saturating_add(n.saturating_mul(t.flops_per_lane as u64).saturating_mul(lanes));
        self.tensor_flops = self.tensor_flops.saturating_add(n.saturating_mul(t.tensor_flops));
    }
}

/// Skipped counts of single warps, by program, parameters and the part of the program counted:
/// the CTAs of a grid run a few programs with a few parameter sets (often one), and counting a
/// warp walks every instruction of its program, which made the counting of skipped softmax
/// CTAs (262,144 of them in unfused attention at 8k tokens) a sixth of a sampled run. Each
/// entry holds its program, so a pointer in the memo is never reused by another program.
#[derive(Clone, Debug, Default)]
pub(crate) struct SkipMemo {
    entries: Vec<MemoEntry>,
}

/// What one warp skips, and what it depends on.
#[derive(Clone, Debug)]
struct MemoEntry {
    prog: Arc<Program>,
    params: [i64; MAX_PARAMS],
    /// `None`: the whole program; else the nest's step and levels and the flat iterations.
    part: Option<(u32, u32, u64)>,
    counts: Skipped,
}

/// Entries a [`SkipMemo`] keeps; the oldest goes first.
const MEMO_ENTRIES: usize = 16;

impl SkipMemo {
    /// Adds to `into` what one warp running `prog` with `params` skips: the whole program
    /// (`body = None`), or `times` flat iterations of `nest`'s body.
    pub(crate) fn add(
        &mut self,
        into: &mut Skipped,
        k: &KernelRun,
        prog: &Arc<Program>,
        params: &[i64; MAX_PARAMS],
        body: Option<(&LoopNest, u64)>,
    ) {
        let part = body.map(|(n, t)| (n.step, n.levels as u32, t));
        if let Some(e) =
            self.entries.iter().find(|e| Arc::ptr_eq(&e.prog, prog) && e.params == *params && e.part == part)
        {
            into.add(&e.counts);
            return;
        }
        let mut one = Skipped::default();
        match body {
            None => prog.executed_with(params, |i, n| one.count(k, i, n)),
            Some((nest, times)) => prog.for_each_in_nest_body(params, nest, times, |i, n| one.count(k, i, n)),
        }
        into.add(&one);
        if self.entries.len() == MEMO_ENTRIES {
            self.entries.remove(0);
        }
        self.entries.push(MemoEntry { prog: prog.clone(), params: *params, part, counts: one });
    }
}
