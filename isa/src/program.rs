//! A warp's instruction stream as a small program: instructions, loops whose addresses advance
//! by strides, and address expressions that depend on the CTA and warp.
//!
//! A trace is a program, not a list: the trace of an 8192³ GEMM is one loop body per warp role,
//! and CTAs that differ only in base addresses share it. The simulator walks the program with a
//! [`crate::cursor::Cursor`] and evaluates addresses only when an instruction issues.

use std::sync::Arc;

use crate::reg::RegRange;

/// Maximum loop nesting depth. Loop counters are the variables `i0` (outermost) .. `i3`.
pub const MAX_LOOP_DEPTH: usize = 4;

/// Maximum number of per-CTA parameters of a program (`p0`..`p7`).
pub const MAX_PARAMS: usize = 8;

/// Number of variables an address expression may depend on: `cta.x, cta.y, cta.z, warp`,
/// the loop counters `i0..i3`, then the parameters `p0..p7` (in this index order).
pub const NUM_VARS: usize = 4 + MAX_LOOP_DEPTH + MAX_PARAMS;

/// Index of `p0` in a variable vector.
pub const PARAM_BASE: usize = 4 + MAX_LOOP_DEPTH;

/// A variable of an address expression.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Var {
    /// `cta.x`, `cta.y`, `cta.z`: the CTA's coordinates in the grid.
    CtaX,
    CtaY,
    CtaZ,
    /// `warp`: the warp's index within its CTA.
    Warp,
    /// `i0`..`i3`: iteration counters of the enclosing loops, outermost first.
    Loop(u8),
    /// `p0`..`p7`: the program's per-CTA parameters ([`CtaParam`]).
    Param(u8),
}

impl Var {
    pub const ALL: [Var; NUM_VARS] = [
        Var::CtaX,
        Var::CtaY,
        Var::CtaZ,
        Var::Warp,
        Var::Loop(0),
        Var::Loop(1),
        Var::Loop(2),
        Var::Loop(3),
        Var::Param(0),
        Var::Param(1),
        Var::Param(2),
        Var::Param(3),
        Var::Param(4),
        Var::Param(5),
        Var::Param(6),
        Var::Param(7),
    ];

    pub const fn index(self) -> usize {
        match self {
            Var::CtaX => 0,
            Var::CtaY => 1,
            Var::CtaZ => 2,
            Var::Warp => 3,
            Var::Loop(d) => 4 + d as usize,
            Var::Param(k) => PARAM_BASE + k as usize,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Var::CtaX => "cta.x",
            Var::CtaY => "cta.y",
            Var::CtaZ => "cta.z",
            Var::Warp => "warp",
            Var::Loop(0) => "i0",
            Var::Loop(1) => "i1",
            Var::Loop(2) => "i2",
            Var::Loop(_) => "i3",
            Var::Param(0) => "p0",
            Var::Param(1) => "p1",
            Var::Param(2) => "p2",
            Var::Param(3) => "p3",
            Var::Param(4) => "p4",
            Var::Param(5) => "p5",
            Var::Param(6) => "p6",
            Var::Param(_) => "p7",
        }
    }

    pub fn from_name(s: &str) -> Option<Var> {
        Var::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// `base + Σ coef[v] · v`, evaluated with wrapping 64-bit arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AddrExpr {
    pub base: u64,
    pub coef: [i64; NUM_VARS],
}

impl AddrExpr {
    pub const fn constant(base: u64) -> AddrExpr {
        AddrExpr { base, coef: [0; NUM_VARS] }
    }

    pub fn with(mut self, v: Var, coef: i64) -> AddrExpr {
        self.coef[v.index()] = coef;
        self
    }

    #[inline]
    pub fn eval(&self, vars: &[i64; NUM_VARS]) -> u64 {
        let mut a = self.base;
        for (c, v) in self.coef.iter().zip(vars) {
            a = a.wrapping_add(c.wrapping_mul(*v) as u64);
        }
        a
    }
}

/// How the addresses of the active lanes follow from the instruction's base address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Lanes {
    /// Lane `l` accesses `base + l·stride` (`stride` 0: every lane the same address).
    Stride(i32),
    /// Explicit offsets from `base`, one per *active* lane in lane order, stored in
    /// [`Program::lane_offsets`] from index `start` (popcount(mask) entries).
    Offsets { start: u32 },
}

/// The memory operand of an instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MemRef {
    /// Index into [`Program::exprs`].
    pub addr: u32,
    pub lanes: Lanes,
    /// For bulk copies (TMA, `UBLKCP`): bytes moved by the whole instruction; 0 otherwise.
    pub bulk_bytes: u32,
}

/// Index of an opcode in the kernel's [`crate::kernel::OpTable`].
pub type OpId = u16;

/// One warp instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Inst {
    pub op: OpId,
    /// Active lanes.
    pub mask: u32,
    pub dst: [RegRange; 2],
    pub src: [RegRange; 4],
    /// Immediate operand where timing depends on it (`DEPBAR.LE SB0, N`: N).
    pub imm: i32,
    pub mem: Option<MemRef>,
    /// Program counter in the original binary (informational; 0 when unknown).
    pub pc: u32,
}

impl Inst {
    pub fn new(op: OpId) -> Inst {
        Inst { op, mask: u32::MAX, dst: [RegRange::NONE; 2], src: [RegRange::NONE; 4], imm: 0, mem: None, pc: 0 }
    }
}

/// How often a loop runs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TripCount {
    /// The same count for every CTA and warp.
    Fixed(u32),
    /// The value of parameter `p<k>` of the warp's CTA, clamped to `[0, u32::MAX]`.
    Param(u8),
}

impl TripCount {
    /// The trip count given the evaluated parameters (`params[k]` is `p<k>`).
    #[inline]
    pub fn resolve(self, params: &[i64; MAX_PARAMS]) -> u32 {
        match self {
            TripCount::Fixed(n) => n,
            TripCount::Param(k) => params[k as usize % MAX_PARAMS].clamp(0, u32::MAX as i64) as u32,
        }
    }
}

/// A per-CTA parameter `p<k>` of a program, evaluated per warp when its cursor is created:
///
/// 1. `s = offset + Σ coef[v]·v` over `cta.x, cta.y, cta.z, warp`, the loop counters `i0..i3`
///    and the *earlier* parameters `p0..p(k-1)` (wrapping 64-bit arithmetic),
/// 2. `q = floor(s / div)` (toward −∞, `div ≥ 1`),
/// 3. `c = clamp(q, lo, hi)`,
/// 4. with a table `t`: `tables[t][clamp(c, 0, len-1)]`, else `c`.
///
/// A parameter that uses a loop counter, directly or through an earlier parameter, is a *tile
/// parameter*: it is evaluated again whenever the warp enters a loop whose counter it uses, or
/// moves to that loop's next iteration, with the counters of the loops then open (0 for a loop
/// that is not); after the loop ends it keeps its last iteration's value. That is how
/// a persistent kernel's CTA reads per-tile facts (the expert of its `i`-th tile) from a table
/// indexed by `cta + grid·i`. A loop's trip count may not be a tile parameter
/// ([`Program::check`]): counts are fixed per CTA, so instruction counts stay closed-form.
///
/// Evaluation never panics, whatever the field values. `min` and `max` of two values follow by
/// chaining: with `p0 = a` and `p1 = b`, `p2 = p0 - clamp(p0 - p1, 0, ∞)` is `min(a, b)`, and
/// `p2 = p0 + clamp(p1 - p0, 0, ∞)` is `max(a, b)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CtaParam {
    pub offset: i64,
    /// Coefficients indexed like [`Var::index`]; later params may not be non-zero.
    pub coef: [i64; NUM_VARS],
    pub div: i64,
    pub lo: i64,
    pub hi: i64,
    /// Index into [`Program::tables`].
    pub table: Option<u32>,
}

impl Default for CtaParam {
    fn default() -> Self {
        CtaParam { offset: 0, coef: [0; NUM_VARS], div: 1, lo: i64::MIN, hi: i64::MAX, table: None }
    }
}

impl CtaParam {
    /// A parameter equal to `offset` (then refined with [`CtaParam::with`] and the fields).
    pub fn constant(offset: i64) -> CtaParam {
        CtaParam { offset, ..CtaParam::default() }
    }

    pub fn with(mut self, v: Var, coef: i64) -> CtaParam {
        self.coef[v.index()] = coef;
        self
    }

    /// Evaluates the parameter; `vars` holds `cta.*`, `warp`, the loop counters and the earlier
    /// parameters at their [`Var::index`] (later parameters are multiplied by their coefficient
    /// too, which [`Program::check`] requires to be 0).
    pub fn eval(&self, vars: &[i64; NUM_VARS], tables: &[Arc<[i64]>]) -> i64 {
        let mut s = self.offset;
        for (c, v) in self.coef.iter().zip(vars) {
            s = s.wrapping_add(c.wrapping_mul(*v));
        }
        let q = s.div_euclid(self.div.max(1));
        let c = q.max(self.lo).min(self.hi);
        match self.table.and_then(|t| tables.get(t as usize)) {
            Some(t) if !t.is_empty() => t[c.clamp(0, t.len() as i64 - 1) as usize],
            _ => c,
        }
    }

    /// Checks the parameter as the `k`-th of a program with `num_tables` tables.
    pub fn check(&self, k: usize, num_tables: usize, tables: &[Arc<[i64]>]) -> Result<(), String> {
        for v in Var::ALL {
            if self.coef[v.index()] == 0 {
                continue;
            }
            match v {
                Var::Param(j) if j as usize >= k => {
                    return Err(format!("p{k} uses {} which is not defined before it", v.name()));
                }
                _ => {}
            }
        }
        if self.div < 1 {
            return Err(format!("p{k}: divisor {} is not at least 1", self.div));
        }
        if self.lo > self.hi {
            return Err(format!("p{k}: clamp range [{}, {}] is empty", self.lo, self.hi));
        }
        if let Some(t) = self.table {
            if t as usize >= num_tables {
                return Err(format!("p{k}: table {t} does not exist"));
            }
            if tables[t as usize].is_empty() {
                return Err(format!("p{k}: table {t} is empty"));
            }
        }
        Ok(())
    }
}

/// One step of a program.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Step {
    Inst(Inst),
    /// Repeat the steps up to the matching `EndLoop` (at index `end`) `count` times.
    Loop {
        count: TripCount,
        end: u32,
    },
    /// Closes the loop that starts at index `start`.
    EndLoop {
        start: u32,
    },
}

/// A program's main loop nest ([`Program::loop_nest`]) for one warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopNest {
    /// Index of the outermost `Loop` step.
    pub step: u32,
    /// Loops in the nest (1 for a single loop).
    pub levels: u8,
    /// Flat iterations: the product of the levels' trip counts.
    pub trips: u64,
    /// Warp instructions issued before the nest.
    pub before: u64,
    /// Warp instructions of one flat iteration.
    pub body: u64,
    /// The innermost level's body, as steps `start..end`.
    body_steps: (u32, u32),
}

/// A warp program. Built with [`ProgramBuilder`] or by a trace reader; immutable once built.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Program {
    pub name: String,
    pub steps: Vec<Step>,
    pub exprs: Vec<AddrExpr>,
    pub lane_offsets: Vec<i64>,
    /// Per-CTA parameters `p0..`, evaluated in order ([`CtaParam`]); at most [`MAX_PARAMS`].
    pub params: Vec<CtaParam>,
    /// Lookup tables the parameters refer to (shared between the programs of a kernel).
    pub tables: Vec<Arc<[i64]>>,
}

impl Program {
    /// The parameter values `p0..p7` of a warp (unused ones 0; all 0, at once, for a program
    /// without parameters).
    pub fn eval_params(&self, cta: [u32; 3], warp: u32) -> [i64; MAX_PARAMS] {
        if self.params.is_empty() {
            return [0; MAX_PARAMS];
        }
        let mut vars = [0i64; NUM_VARS];
        vars[0] = cta[0] as i64;
        vars[1] = cta[1] as i64;
        vars[2] = cta[2] as i64;
        vars[3] = warp as i64;
        for (k, p) in self.params.iter().take(MAX_PARAMS).enumerate() {
            vars[PARAM_BASE + k] = p.eval(&vars, &self.tables);
        }
        let mut out = [0i64; MAX_PARAMS];
        out.copy_from_slice(&vars[PARAM_BASE..]);
        out
    }

    /// The loop levels the tile parameters follow: bit `d` is set when some parameter uses `i<d>`,
    /// directly or through an earlier parameter ([`CtaParam`]). 0 for most programs.
    pub fn tile_levels(&self) -> u8 {
        let mut levels = [0u8; MAX_PARAMS];
        let mut all = 0u8;
        for (k, p) in self.params.iter().take(MAX_PARAMS).enumerate() {
            let mut m = 0u8;
            for d in 0..MAX_LOOP_DEPTH {
                if p.coef[Var::Loop(d as u8).index()] != 0 {
                    m |= 1 << d;
                }
            }
            for (j, lj) in levels.iter().enumerate().take(k) {
                if p.coef[PARAM_BASE + j] != 0 {
                    m |= lj;
                }
            }
            levels[k] = m;
            all |= m;
        }
        all
    }

    /// Whether parameter `p<k>` is a tile parameter (follows loop counters).
    pub fn is_tile_param(&self, k: usize) -> bool {
        let mut tile = [false; MAX_PARAMS];
        for (i, p) in self.params.iter().take(MAX_PARAMS).enumerate() {
            tile[i] = (0..MAX_LOOP_DEPTH).any(|d| p.coef[Var::Loop(d as u8).index()] != 0)
                || (0..i).any(|j| tile[j] && p.coef[PARAM_BASE + j] != 0);
        }
        tile.get(k).copied().unwrap_or(false)
    }

    /// Whether some loop's trip count depends on a parameter.
    pub fn has_param_loops(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::Loop { count: TripCount::Param(_), .. }))
    }

    /// Number of warp instructions one execution of the program issues (loops expanded,
    /// saturating). For programs with parameter-dependent loops this is the count of CTA
    /// (0,0,0), warp 0; use [`Program::dynamic_len_for`] for a particular warp.
    pub fn dynamic_len(&self) -> u64 {
        self.dynamic_len_for([0, 0, 0], 0)
    }

    /// Number of warp instructions the warp `warp` of CTA `cta` issues (saturating at
    /// `u64::MAX`).
    pub fn dynamic_len_for(&self, cta: [u32; 3], warp: u32) -> u64 {
        u64::try_from(self.dynamic_len_wide(cta, warp)).unwrap_or(u64::MAX)
    }

    /// [`Program::dynamic_len_for`] in 128 bits (saturating at `u128::MAX`, which loops of u32
    /// trip counts can reach only when nested five deep): exact where a count passes 2^64.
    pub fn dynamic_len_wide(&self, cta: [u32; 3], warp: u32) -> u128 {
        let params = self.eval_params(cta, warp);
        fn walk(steps: &[Step], mut i: usize, end: usize, params: &[i64; MAX_PARAMS]) -> u128 {
            let mut n = 0u128;
            while i < end {
                match steps[i] {
                    Step::Inst(_) => {
                        n = n.saturating_add(1);
                        i += 1;
                    }
                    Step::Loop { count, end: e } => {
                        let c = count.resolve(params) as u128;
                        n = n.saturating_add(walk(steps, i + 1, e as usize, params).saturating_mul(c));
                        i = e as usize + 1;
                    }
                    Step::EndLoop { .. } => i += 1,
                }
            }
            n
        }
        walk(&self.steps, 0, self.steps.len(), &params)
    }

    /// Calls `f(inst, n)` for every instruction of the program with `n`, the number of times the
    /// warp `warp` of CTA `cta` executes it (loops expanded, saturating; instructions in loops of
    /// zero trips are not visited). What a simulator needs to count a warp's work without
    /// issuing it: the sum of every `n` is [`Program::dynamic_len_for`].
    pub fn for_each_executed(&self, cta: [u32; 3], warp: u32, f: impl FnMut(&Inst, u64)) {
        let params = self.eval_params(cta, warp);
        self.executed_in(&params, 0, self.steps.len(), 1, f);
    }

    /// [`Program::for_each_executed`] with the warp's parameters already evaluated
    /// ([`Program::eval_params`]).
    pub fn executed_with(&self, params: &[i64; MAX_PARAMS], f: impl FnMut(&Inst, u64)) {
        self.executed_in(params, 0, self.steps.len(), 1, f);
    }

    /// [`Program::for_each_executed`] over the balanced steps `from..to`, each execution of them
    /// counting `times`.
    fn executed_in(
        &self,
        params: &[i64; MAX_PARAMS],
        from: usize,
        to: usize,
        times: u64,
        mut f: impl FnMut(&Inst, u64),
    ) {
        let mut mult = [times; MAX_LOOP_DEPTH + 1];
        let mut depth = 0usize;
        for step in &self.steps[from.min(to)..to.min(self.steps.len())] {
            match step {
                Step::Inst(i) => {
                    if mult[depth] > 0 {
                        f(i, mult[depth]);
                    }
                }
                Step::Loop { count, .. } => {
                    // Program::check bounds the depth; a malformed program only loses counts.
                    let c = count.resolve(params) as u64;
                    let next = (depth + 1).min(MAX_LOOP_DEPTH);
                    mult[next] = mult[depth].saturating_mul(c);
                    depth = next;
                }
                Step::EndLoop { .. } => depth = depth.saturating_sub(1),
            }
        }
    }

    /// The program's main loop nest for a warp with parameters `params` (the cursor's): its
    /// first top-level loop with the loops perfectly nested in it (a loop whose body is exactly
    /// one loop), iterated as one flat loop. `None` without a top-level loop or when a level has
    /// no trips. A persistent kernel's tile loop is such a nest; a sampler skips a range of its
    /// flat iterations ([`Cursor::skip_iterations`](crate::Cursor::skip_iterations)) and counts what they would have issued
    /// ([`Program::for_each_in_nest_body`]).
    pub fn loop_nest(&self, params: &[i64; MAX_PARAMS]) -> Option<LoopNest> {
        // Tile parameters change addresses and table entries from one iteration to the next,
        // never trip counts (`check` refuses those), so every flat iteration issues the same
        // instructions: a sampler that skips some assumes the skipped tiles cost what the
        // measured ones did (a grouped GEMM's tiles are all BLOCK_M × BLOCK_N × K).
        let mut before = 0u64;
        let mut i = 0usize;
        while i < self.steps.len() {
            match self.steps[i] {
                Step::Inst(_) => before += 1,
                Step::Loop { .. } => break,
                Step::EndLoop { .. } => return None,
            }
            i += 1;
        }
        let Step::Loop { .. } = *self.steps.get(i)? else { return None };
        self.nest_at(params, i, before)
    }

    /// The top-level loop nest that issues the most instructions for a warp with parameters
    /// `params` (the first of equals), with the instructions issued before it, earlier loops
    /// included. A FlashAttention-2 CTA runs its partly masked key blocks in a loop of one or
    /// two trips before the long unmasked one: [`Program::loop_nest`] would find the short one.
    /// `None` without a top-level loop of at least one trip.
    pub fn longest_nest(&self, params: &[i64; MAX_PARAMS]) -> Option<LoopNest> {
        self.longest_nest_in(params, 0, self.steps.len())
    }

    /// The longest loop nest inside one flat iteration of `nest` (a top-level loop of its
    /// innermost body, with the loops perfectly nested in it): the key-block loop of a
    /// persistent FlashAttention tile, the K loop of a persistent GEMM tile. `before` counts
    /// the body's instructions ahead of it. `None` when the body has no loop with trips, or
    /// when the two nests together are deeper than a cursor's frames.
    pub fn inner_nest(&self, params: &[i64; MAX_PARAMS], nest: &LoopNest) -> Option<LoopNest> {
        self.longest_nest_in(params, nest.body_steps.0 as usize, nest.body_steps.1 as usize)
            .filter(|n| nest.levels as usize + n.levels as usize <= MAX_LOOP_DEPTH)
    }

    /// The nest issuing the most instructions among the top-level loops of steps `from..to`
    /// (the first of equals), `before` counting the instructions of the range ahead of it.
    fn longest_nest_in(&self, params: &[i64; MAX_PARAMS], from: usize, to: usize) -> Option<LoopNest> {
        let mut best: Option<LoopNest> = None;
        let (mut before, mut i) = (0u64, from);
        while i < to.min(self.steps.len()) {
            match self.steps[i] {
                Step::Inst(_) => {
                    before = before.saturating_add(1);
                    i += 1;
                }
                Step::Loop { end, .. } => {
                    if let Some(n) = self.nest_at(params, i, before)
                        && best.as_ref().is_none_or(|b| n.trips.saturating_mul(n.body) > b.trips.saturating_mul(b.body))
                    {
                        best = Some(n);
                    }
                    let mut whole = 0u64;
                    self.executed_in(params, i, end as usize + 1, 1, |_, n| whole = whole.saturating_add(n));
                    before = before.saturating_add(whole);
                    i = end as usize + 1;
                }
                Step::EndLoop { .. } => return None,
            }
        }
        best
    }

    /// The nest whose outermost `Loop` is step `outer`, `before` instructions into the program.
    fn nest_at(&self, params: &[i64; MAX_PARAMS], outer: usize, before: u64) -> Option<LoopNest> {
        let (mut i, mut levels, mut trips) = (outer, 0u8, 1u64);
        loop {
            let Step::Loop { count, end } = self.steps[i] else { return None };
            let c = count.resolve(params) as u64;
            if c == 0 {
                return None;
            }
            trips = trips.checked_mul(c)?;
            levels += 1;
            let end = end as usize;
            // Descend while the body is exactly one loop.
            match self.steps.get(i + 1) {
                Some(Step::Loop { end: e, .. }) if *e as usize + 1 == end && (levels as usize) < MAX_LOOP_DEPTH => {
                    i += 1;
                }
                _ => {
                    let mut body = 0u64;
                    self.executed_in(params, i + 1, end, 1, |_, n| body = body.saturating_add(n));
                    return Some(LoopNest {
                        step: outer as u32,
                        levels,
                        trips,
                        before,
                        body,
                        body_steps: (i as u32 + 1, end as u32),
                    });
                }
            }
        }
    }

    /// Calls `f(inst, n × times)` for every instruction of one flat iteration of `nest`'s body,
    /// `n` being how often one iteration executes it.
    pub fn for_each_in_nest_body(
        &self,
        params: &[i64; MAX_PARAMS],
        nest: &LoopNest,
        times: u64,
        f: impl FnMut(&Inst, u64),
    ) {
        self.executed_in(params, nest.body_steps.0 as usize, nest.body_steps.1 as usize, times, f);
    }

    /// Checks the structural invariants that readers and builders must guarantee: loops are
    /// balanced and nest at most [`MAX_LOOP_DEPTH`] deep, every `MemRef` points inside `exprs`
    /// and `lane_offsets`. Returns a description of the first violation.
    /// Removes the loops whose bodies hold no instruction, nested empty loops included. They
    /// execute nothing, but a cursor would walk every one of their iterations: three nested
    /// empty loops of 2^32 trips hung the reader's checks and `gpusim run` (found by fuzzing
    /// the text reader). Every reader calls this once a program has passed [`Program::check`]
    /// (which guarantees balanced loops), so a trace and its written-back form agree.
    pub fn drop_empty_loops(&mut self) {
        if !self.steps.windows(2).any(|w| matches!(w, [Step::Loop { .. }, Step::EndLoop { .. }])) {
            return;
        }
        let mut out: Vec<Step> = Vec::with_capacity(self.steps.len());
        let mut open: Vec<usize> = Vec::new();
        for s in self.steps.drain(..) {
            match s {
                Step::Loop { count, .. } => {
                    open.push(out.len());
                    out.push(Step::Loop { count, end: 0 });
                }
                Step::EndLoop { .. } => {
                    let Some(start) = open.pop() else { continue };
                    if out.len() == start + 1 {
                        out.pop();
                    } else {
                        let end = out.len() as u32;
                        if let Step::Loop { end: e, .. } = &mut out[start] {
                            *e = end;
                        }
                        out.push(Step::EndLoop { start: start as u32 });
                    }
                }
                inst @ Step::Inst(_) => out.push(inst),
            }
        }
        self.steps = out;
    }

    pub fn check(&self) -> Result<(), String> {
        if self.params.len() > MAX_PARAMS {
            return Err(format!("{} parameters, at most {MAX_PARAMS} allowed", self.params.len()));
        }
        if let Some(t) = self.tables.iter().position(|t| t.is_empty()) {
            return Err(format!("table {t} is empty"));
        }
        for (k, p) in self.params.iter().enumerate() {
            p.check(k, self.tables.len(), &self.tables)?;
        }
        for (i, e) in self.exprs.iter().enumerate() {
            for k in self.params.len()..MAX_PARAMS {
                if e.coef[PARAM_BASE + k] != 0 {
                    return Err(format!("address expression {i} uses undefined parameter p{k}"));
                }
            }
        }
        let mut stack: Vec<usize> = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            match *s {
                Step::Loop { end, count } => {
                    if let TripCount::Param(k) = count {
                        if k as usize >= self.params.len() {
                            return Err(format!("step {i}: loop count uses undefined parameter p{k}"));
                        }
                        if self.is_tile_param(k as usize) {
                            return Err(format!(
                                "step {i}: loop count p{k} follows loop counters (a trip count is fixed per CTA)"
                            ));
                        }
                    }
                    stack.push(i);
                    if stack.len() > MAX_LOOP_DEPTH {
                        return Err(format!("step {i}: loops nest deeper than {MAX_LOOP_DEPTH}"));
                    }
                    if end as usize <= i || end as usize >= self.steps.len() {
                        return Err(format!("step {i}: loop end {end} out of range"));
                    }
                }
                Step::EndLoop { start } => {
                    let Some(open) = stack.pop() else {
                        return Err(format!("step {i}: `end` without a loop"));
                    };
                    if open != start as usize {
                        return Err(format!("step {i}: loop end does not match its start"));
                    }
                    if !matches!(self.steps[open], Step::Loop { end, .. } if end as usize == i) {
                        return Err(format!("step {i}: loop start does not point here"));
                    }
                }
                Step::Inst(inst) => {
                    if let Some(m) = inst.mem {
                        if m.addr as usize >= self.exprs.len() {
                            return Err(format!("step {i}: address expression {} out of range", m.addr));
                        }
                        if let Lanes::Offsets { start } = m.lanes {
                            let need = start as usize + inst.mask.count_ones() as usize;
                            if need > self.lane_offsets.len() {
                                return Err(format!("step {i}: lane offsets out of range"));
                            }
                        }
                    }
                }
            }
        }
        if let Some(open) = stack.pop() {
            return Err(format!("step {open}: loop is never closed"));
        }
        Ok(())
    }
}

/// Builds a [`Program`] with balanced loops.
#[derive(Default)]
pub struct ProgramBuilder {
    prog: Program,
    open: Vec<usize>,
    /// Start of each distinct lane offset list already added.
    offset_lists: std::collections::HashMap<Vec<i64>, u32>,
    /// Index of each distinct address expression already added.
    expr_index: std::collections::HashMap<AddrExpr, u32>,
}

impl ProgramBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        ProgramBuilder { prog: Program { name: name.into(), ..Program::default() }, ..ProgramBuilder::default() }
    }

    /// Number of parameters added so far.
    pub fn num_params(&self) -> usize {
        self.prog.params.len()
    }

    /// Current loop depth (0 outside any loop).
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    pub fn inst(&mut self, inst: Inst) -> &mut Self {
        self.prog.steps.push(Step::Inst(inst));
        self
    }

    /// Adds an address expression and returns its index for a [`MemRef`].
    pub fn expr(&mut self, e: AddrExpr) -> u32 {
        let next = self.prog.exprs.len() as u32;
        let i = *self.expr_index.entry(e).or_insert(next);
        if i == next {
            self.prog.exprs.push(e);
        }
        i
    }

    /// Adds explicit per-active-lane offsets and returns the [`Lanes`] that refers to them.
    /// Identical lists are stored once (as the text trace reader does).
    pub fn offsets(&mut self, offs: &[i64]) -> Lanes {
        if let Some(&start) = self.offset_lists.get(offs) {
            return Lanes::Offsets { start };
        }
        let start = self.prog.lane_offsets.len() as u32;
        self.prog.lane_offsets.extend_from_slice(offs);
        self.offset_lists.insert(offs.to_vec(), start);
        Lanes::Offsets { start }
    }

    /// A memory instruction: sets `inst.mem` from the expression and lane pattern.
    pub fn mem_inst(&mut self, mut inst: Inst, addr: AddrExpr, lanes: Lanes, bulk_bytes: u32) -> &mut Self {
        let addr = self.expr(addr);
        inst.mem = Some(MemRef { addr, lanes, bulk_bytes });
        self.inst(inst)
    }

    /// Opens a loop; fails when nesting would exceed [`MAX_LOOP_DEPTH`].
    pub fn begin_loop(&mut self, count: u32) -> Result<&mut Self, String> {
        if self.open.len() >= MAX_LOOP_DEPTH {
            return Err(format!("loops nest deeper than {MAX_LOOP_DEPTH}"));
        }
        self.open.push(self.prog.steps.len());
        self.prog.steps.push(Step::Loop { count: TripCount::Fixed(count), end: 0 });
        Ok(self)
    }

    /// Opens a loop that runs `p<p>` times; fails when nesting would exceed
    /// [`MAX_LOOP_DEPTH`] or the parameter is not defined yet.
    pub fn begin_loop_param(&mut self, p: u8) -> Result<&mut Self, String> {
        if p as usize >= self.prog.params.len() {
            return Err(format!("loop count p{p} is not defined"));
        }
        if self.open.len() >= MAX_LOOP_DEPTH {
            return Err(format!("loops nest deeper than {MAX_LOOP_DEPTH}"));
        }
        self.open.push(self.prog.steps.len());
        self.prog.steps.push(Step::Loop { count: TripCount::Param(p), end: 0 });
        Ok(self)
    }

    /// Adds the next parameter and returns its index `k` (`p<k>`).
    pub fn add_param(&mut self, p: CtaParam) -> Result<u8, String> {
        let k = self.prog.params.len();
        if k >= MAX_PARAMS {
            return Err(format!("more than {MAX_PARAMS} parameters"));
        }
        p.check(k, self.prog.tables.len(), &self.prog.tables)?;
        self.prog.params.push(p);
        Ok(k as u8)
    }

    /// Adds a lookup table (shared, not copied) and returns its index for [`CtaParam::table`].
    pub fn add_table(&mut self, t: Arc<[i64]>) -> u32 {
        if let Some(i) = self.prog.tables.iter().position(|x| Arc::ptr_eq(x, &t)) {
            return i as u32;
        }
        self.prog.tables.push(t);
        self.prog.tables.len() as u32 - 1
    }

    pub fn end_loop(&mut self) -> Result<&mut Self, String> {
        let start = self.open.pop().ok_or_else(|| "`end` without a loop".to_string())?;
        let end = self.prog.steps.len() as u32;
        if let Step::Loop { end: e, .. } = &mut self.prog.steps[start] {
            *e = end;
        }
        self.prog.steps.push(Step::EndLoop { start: start as u32 });
        Ok(self)
    }

    pub fn finish(mut self) -> Result<Program, String> {
        if !self.open.is_empty() {
            return Err(format!("{} loop(s) never closed", self.open.len()));
        }
        self.prog.check()?;
        self.prog.drop_empty_loops();
        Ok(self.prog)
    }
}
