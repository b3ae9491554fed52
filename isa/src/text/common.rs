//! Shared by the text and the binary format: the validation that readers apply before handing a
//! kernel out and that writers apply before writing one, and the plan that decides which programs
//! a writer puts into `cta` sections.

use std::collections::HashMap;
use std::ops::Range;

use crate::kernel::{KernelInfo, KernelTrace};
use crate::program::{Lanes, Program, Step, Var};
use crate::reg::{Reg, RegRange};

/// Most threads a CTA may have (the CUDA limit). Bounds the per-CTA layout to 32 warps.
pub(crate) const MAX_THREADS_PER_CTA: u32 = 1024;

/// Checks the grid: every extent at least 1 and the CTA count fits in 64 bits.
pub(crate) fn check_grid(g: [u32; 3]) -> Result<(), String> {
    if g.contains(&0) {
        return Err(format!("grid {} {} {} has an empty dimension", g[0], g[1], g[2]));
    }
    (g[0] as u64)
        .checked_mul(g[1] as u64)
        .and_then(|n| n.checked_mul(g[2] as u64))
        .map(|_| ())
        .ok_or_else(|| format!("grid {} {} {} has more than 2^64 CTAs", g[0], g[1], g[2]))
}

/// Checks the block: every extent at least 1, at most [`MAX_THREADS_PER_CTA`] threads.
pub(crate) fn check_block(b: [u32; 3]) -> Result<(), String> {
    if b.contains(&0) {
        return Err(format!("block {} {} {} has an empty dimension", b[0], b[1], b[2]));
    }
    let n = (b[0] as u64).saturating_mul(b[1] as u64).saturating_mul(b[2] as u64);
    if n > MAX_THREADS_PER_CTA as u64 {
        return Err(format!("block {} {} {} has {n} threads, more than {MAX_THREADS_PER_CTA}", b[0], b[1], b[2]));
    }
    Ok(())
}

/// Checks the cluster shape: every extent at least 1.
pub(crate) fn check_cluster(c: [u32; 3]) -> Result<(), String> {
    if c.contains(&0) {
        return Err(format!("cluster {} {} {} has an empty dimension", c[0], c[1], c[2]));
    }
    Ok(())
}

/// Everything about a kernel's info that readers enforce. Must run before any method of
/// [`KernelInfo`] that multiplies extents.
pub(crate) fn check_info(info: &KernelInfo) -> Result<(), String> {
    check_grid(info.grid.as_array())?;
    check_block(info.block.as_array())?;
    check_cluster(info.cluster.as_array())?;
    if let Some(d) = info.deps.iter().find(|&&d| d >= info.id) {
        return Err(format!("kernel {} depends on kernel {d}, which does not come earlier", info.id));
    }
    Ok(())
}

/// One past the last register of the file that `r` belongs to, or `None` when `r` is not a
/// register that parses back to itself (`R255`, `P7`, `UP7` are constants; numbers past `SB7`
/// do not exist).
fn file_end(r: Reg) -> Option<u16> {
    match r.0 {
        0..=254 => Some(255),
        256..=319 => Some(320),
        320..=326 => Some(327),
        328..=334 => Some(335),
        336..=351 => Some(352),
        352..=359 => Some(360),
        _ => None,
    }
}

/// A register operand is either [`RegRange::NONE`] or a run of registers that stays inside one
/// register file.
pub(crate) fn check_reg_range(r: RegRange) -> Result<(), String> {
    if r == RegRange::NONE {
        return Ok(());
    }
    let Some(end) = file_end(r.first) else {
        return Err(format!("register number {} does not exist", r.first.0));
    };
    if r.count == 0 {
        return Err(format!("register range {} has no registers", r.first));
    }
    if r.first.0 as u32 + r.count as u32 > end as u32 {
        return Err(format!("register range {r} runs past the end of its register file"));
    }
    Ok(())
}

/// The structural checks of [`Program::check`] plus: op ids in the table, register operands
/// valid, and address expressions use loop counters only inside that many nested loops.
/// Returns the step index of the first violation with a description.
pub(crate) fn check_program(p: &Program, num_ops: usize) -> Result<(), String> {
    p.check()?;
    let mut depth = 0usize;
    for (i, s) in p.steps.iter().enumerate() {
        match s {
            Step::Loop { .. } => depth += 1,
            Step::EndLoop { .. } => depth = depth.saturating_sub(1),
            Step::Inst(inst) => {
                if inst.op as usize >= num_ops {
                    return Err(format!("step {i}: opcode id {} is not in the kernel's table", inst.op));
                }
                for r in inst.dst.iter().chain(inst.src.iter()) {
                    check_reg_range(*r).map_err(|e| format!("step {i}: {e}"))?;
                }
                if let Some(m) = inst.mem {
                    let e = &p.exprs[m.addr as usize];
                    check_loop_vars(&e.coef, depth).map_err(|e| format!("step {i}: {e}"))?;
                    if let Lanes::Offsets { start } = m.lanes {
                        // Program::check verified the range; keep the u32 sum from overflowing.
                        (start as u64 + inst.mask.count_ones() as u64)
                            .le(&(u32::MAX as u64))
                            .then_some(())
                            .ok_or_else(|| format!("step {i}: lane offsets out of range"))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// An address expression may use `iD` only at loop depth greater than `D`.
pub(crate) fn check_loop_vars(coef: &[i64; crate::program::NUM_VARS], depth: usize) -> Result<(), String> {
    for d in depth..crate::program::MAX_LOOP_DEPTH {
        let v = Var::Loop(d as u8);
        if coef[v.index()] != 0 {
            return Err(format!("`{}` used at loop depth {depth}: there is no such loop counter here", v.name()));
        }
    }
    Ok(())
}

/// Checks that a kernel can be written so that a reader reads back an equal kernel: `position`
/// is its index in the trace.
pub(crate) fn check_kernel_for_write(k: &KernelTrace, position: usize) -> Result<(), String> {
    let what = || format!("kernel {position} `{}`", k.info.name);
    if k.info.id as usize != position {
        return Err(format!("{}: id {} is not its position {position} in the trace", what(), k.info.id));
    }
    check_info(&k.info).map_err(|e| format!("{}: {e}", what()))?;
    for p in &k.programs {
        check_program(p, k.ops.len()).map_err(|e| format!("{}: program `{}`: {e}", what(), p.name))?;
    }
    let warps = k.info.warps_per_cta() as usize;
    let num_ctas = k.info.num_ctas();
    let n = k.programs.len();
    let check_layout = |l: &[u32], w: &str| -> Result<(), String> {
        if l.len() != warps {
            return Err(format!("{}: {w} has {} warp programs for {warps} warps", what(), l.len()));
        }
        if let Some(bad) = l.iter().find(|&&p| p as usize >= n) {
            return Err(format!("{}: {w} uses program {bad}, which does not exist", what()));
        }
        Ok(())
    };
    if k.layout.default.is_empty() {
        if k.layout.overrides.len() as u64 != num_ctas {
            return Err(format!("{}: no default layout, and not every CTA has an override", what()));
        }
    } else {
        check_layout(&k.layout.default, "the default layout")?;
    }
    for (cta, l) in &k.layout.overrides {
        if *cta >= num_ctas {
            return Err(format!("{}: override for CTA {cta}, outside the grid of {num_ctas} CTAs", what()));
        }
        check_layout(l, &format!("the override of CTA {cta}"))?;
    }
    if n > u32::MAX as usize {
        return Err(format!("{}: too many programs", what()));
    }
    Ok(())
}

/// Where a writer defines each program: `0..kernel_level` at kernel level, the rest inside the
/// `cta` section of the only CTA that uses it, so that a streaming reader holds only the programs
/// of one section at a time. Section programs are defined in index order, so that a reader that
/// appends each section's programs to the kernel's list gets the same indices back.
pub(crate) struct Plan {
    pub kernel_level: usize,
    /// For each override in CTA order: the range of program indices its section defines.
    pub locals: Vec<Range<usize>>,
}

impl Plan {
    pub(crate) fn new(k: &KernelTrace) -> Plan {
        #[derive(Clone, Copy, PartialEq)]
        enum Use {
            None,
            Shared,
            Only(u64),
        }
        let n = k.programs.len();
        let mut uses = vec![Use::None; n];
        for &p in &k.layout.default {
            if let Some(u) = uses.get_mut(p as usize) {
                *u = Use::Shared;
            }
        }
        for (&cta, l) in &k.layout.overrides {
            for &p in l {
                if let Some(u) = uses.get_mut(p as usize) {
                    *u = match *u {
                        Use::None => Use::Only(cta),
                        Use::Only(c) if c == cta => Use::Only(cta),
                        _ => Use::Shared,
                    };
                }
            }
        }
        // The longest suffix of programs each used by a single CTA, owners non-decreasing.
        let mut kernel_level = n;
        let mut next_owner = u64::MAX;
        while kernel_level > 0 {
            match uses[kernel_level - 1] {
                Use::Only(c) if c <= next_owner => {
                    next_owner = c;
                    kernel_level -= 1;
                }
                _ => break,
            }
        }
        let mut locals = Vec::with_capacity(k.layout.overrides.len());
        let mut p = kernel_level;
        for &cta in k.layout.overrides.keys() {
            let start = p;
            while p < n && uses[p] == Use::Only(cta) {
                p += 1;
            }
            locals.push(start..p);
        }
        Plan { kernel_level, locals }
    }
}

/// Resolves program references the way the text reader does: a name means the latest program
/// of that name visible in the current scope (section programs shadow kernel-level ones).
pub(crate) struct NameScope<'a> {
    kernel: HashMap<&'a str, u32>,
}

impl<'a> NameScope<'a> {
    pub(crate) fn new(programs: &'a [std::sync::Arc<Program>], kernel_level: usize) -> Self {
        let mut kernel = HashMap::new();
        for (i, p) in programs[..kernel_level].iter().enumerate() {
            kernel.insert(p.name.as_str(), i as u32);
        }
        NameScope { kernel }
    }

    /// Whether a reference by name to program `p` resolves to `p`, with `locals` (a range of
    /// program indices) the current section's own programs.
    pub(crate) fn name_resolves(&self, programs: &[std::sync::Arc<Program>], locals: Range<usize>, p: u32) -> bool {
        let name = programs[p as usize].name.as_str();
        let local = locals.clone().rev().find(|&i| programs[i].name == name);
        match local {
            Some(i) => i == p as usize,
            None => self.kernel.get(name) == Some(&p),
        }
    }
}
