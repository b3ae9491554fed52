//! M-grouped GEMMs in the DeepGEMM style (the expert GEMMs of a MoE layer): `G` groups (experts),
//! each `D[g] = A[g] · B[g]ᵀ` with its own rows of A and its own `N×K` matrix B, in one launch
//! (../shared/notes/kernel-designs.md §6).
//!
//! - **Contiguous** (`m_grouped_fp8_gemm_nt_contiguous`): A holds every group's rows one after
//!   another, each group's segment padded to the m-alignment (128, DeepGEMM's `get_mk_alignment`),
//!   so every m-block belongs to one expert; the tiles cover the padded total M × N. A group with
//!   no rows contributes no m-block.
//! - **Masked** (`m_grouped_fp8_gemm_nt_masked`, decode under CUDA graphs): A is
//!   `[G, capacity, K]` and group `g` has `valid[g]` rows. The launch is sized for the capacity
//!   (`G · ⌈capacity/BLOCK_M⌉ · ⌈N/BLOCK_N⌉` tiles), and the tiles past `⌈valid[g]/BLOCK_M⌉` do no
//!   work; the last valid m-block of a group computes its whole `BLOCK_M` rows, so the padding
//!   wasted is exactly `Σ (⌈valid/BLOCK_M⌉·BLOCK_M − valid)` rows.
//!
//! The kernel is the Hopper recipe ([`super::HopperRecipe`], fp8 block-scaled with its 1×128 /
//! 128×128 scales and FFMA promotion, or bf16) with its grouped form (`hopper::Grouping`). As
//! DeepGEMM's, the grid is persistent: one CTA per SM (rounded down to whole clusters), CTA `c`
//! of `G` taking tiles `c, c + G, c + 2G, ...` of the scheduler's list (`GroupedProblem::tiles`:
//! the computing m-blocks × n-blocks, swizzled in groups of 16 along n when A is multicast, else
//! along m; a masked group's tiles past its valid rows are not in the list, as DeepGEMM's
//! scheduler skips them). Each tile's expert, m-block and n-block are *tile parameters* read
//! from tables (the isa's `CtaParam` following the tile loop's counter), so the trace holds one
//! producer and one consumer program whatever the groups, and the producer loads the next tile's
//! stages while the consumers run the previous tile's epilogue. Half-tiles whose rows are all
//! padding are computed in full (DeepGEMM skips their math). With `persistent = false` the
//! recipe runs one CTA per tile instead (the CUDA twin's form), the expert and whether the tile
//! computes read per CTA.
//!
//! The block selection is DeepGEMM's ([`super::deepgemm_recipe`]): contiguous fixes BLOCK_M to the
//! alignment (128), masked picks 64 or 128 for the expected rows per group; multicast only on A.
//! FLOPs follow DeepGEMM's test: contiguous counts the padded M, masked the valid rows.

use std::fmt;
use std::sync::Arc;

use gpusim_configs::Arch;
use gpusim_isa::Trace;

use super::hopper::{self, Grouping};
use super::select::{MulticastRule, deepgemm_recipe};
use super::{Dtype, Epilogue, GemmProblem, HopperRecipe};

/// DeepGEMM's m-alignment of contiguous groups (`get_mk_alignment_for_contiguous_layout`).
pub const CONTIGUOUS_ALIGNMENT: u64 = 128;

/// How the groups' rows are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Contiguous,
    Masked,
}

impl Layout {
    pub const fn name(self) -> &'static str {
        match self {
            Layout::Contiguous => "contiguous",
            Layout::Masked => "masked",
        }
    }

    pub fn parse(s: &str) -> Option<Layout> {
        match s.to_ascii_lowercase().as_str() {
            "contiguous" | "contig" => Some(Layout::Contiguous),
            "masked" => Some(Layout::Masked),
            _ => None,
        }
    }
}

/// A grouped GEMM problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupedProblem {
    /// Rows of each group (contiguous: its tokens; masked: its valid rows).
    pub m: Vec<u64>,
    pub n: u64,
    pub k: u64,
    pub dtype: Dtype,
    pub block_scaled: bool,
    pub layout: Layout,
    /// Masked: rows per group the launch is sized for (≥ every `m`); 0 = the largest `m`.
    pub capacity: u64,
}

/// Largest number of groups.
pub const MAX_GROUPS: u64 = 4096;

impl GroupedProblem {
    pub fn groups(&self) -> u64 {
        self.m.len() as u64
    }

    /// The masked capacity in effect.
    pub fn capacity(&self) -> u64 {
        if self.capacity > 0 { self.capacity } else { self.m.iter().copied().max().unwrap_or(0).max(1) }
    }

    /// The FLOPs DeepGEMM's test counts: `2·M·N·K` with the padded M (contiguous) or the valid
    /// rows (masked).
    pub fn flops(&self) -> u64 {
        let m: u64 = match self.layout {
            Layout::Contiguous => self.m.iter().map(|&m| m.div_ceil(CONTIGUOUS_ALIGNMENT) * CONTIGUOUS_ALIGNMENT).sum(),
            Layout::Masked => self.m.iter().sum(),
        };
        2 * m * self.n * self.k
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.m.is_empty() || self.groups() > MAX_GROUPS {
            return Err(format!("groups = {} must be between 1 and {MAX_GROUPS}", self.groups()));
        }
        if self.m.iter().all(|&m| m == 0) {
            return Err("every group is empty (no rows)".into());
        }
        if self.layout == Layout::Masked
            && let Some(m) = self.m.iter().find(|&&m| m > self.capacity())
        {
            return Err(format!("a group's {m} valid rows exceed the masked capacity {}", self.capacity()));
        }
        if self.block_scaled && self.dtype != Dtype::Fp8 {
            return Err(format!("block scaling is for fp8 inputs, not {}", self.dtype));
        }
        if !matches!(self.dtype, Dtype::Fp8 | Dtype::Bf16) {
            return Err(format!("the grouped GEMM takes fp8 or bf16, not {}", self.dtype));
        }
        self.dense(128).validate()
    }

    /// The dense problem the plan sees for m-blocks of `bm` rows: every m-block's rows, one B.
    fn dense(&self, bm: u64) -> GemmProblem {
        let rows = self.m_blocks(bm) * bm;
        GemmProblem {
            m: rows.max(1),
            n: self.n,
            k: self.k,
            batch: 1,
            dtype: self.dtype,
            block_scaled: self.block_scaled,
        }
    }

    /// m-blocks of `bm` rows the launch covers.
    pub fn m_blocks(&self, bm: u64) -> u64 {
        match self.layout {
            Layout::Contiguous => {
                self.m.iter().map(|&m| m.div_ceil(CONTIGUOUS_ALIGNMENT) * CONTIGUOUS_ALIGNMENT / bm.max(1)).sum()
            }
            Layout::Masked => self.groups() * self.capacity().div_ceil(bm.max(1)),
        }
    }

    /// The persistent scheduler's tiles, in order, for m-blocks of `bm` rows and `tn` n-blocks:
    /// per segment (the whole launch for contiguous, each group for masked) its computing
    /// m-blocks × n-blocks, swizzled as DeepGEMM's `get_swizzled_block_idx` in groups of 16
    /// blocks along n when A is multicast (so the two CTAs of a cluster, consecutive tiles, share
    /// an m-block), else along m. A multicast list of odd length repeats its last tile, so both
    /// CTAs of every cluster run as many tiles (the real kernel's peer loads an out-of-bounds box
    /// and skips the math; here it computes).
    pub(crate) fn tiles(&self, bm: u64, tn: u64, multicast_a: bool) -> hopper::GroupTiles {
        const PER_GROUP: u64 = 16;
        let (expert, active) = self.block_tables(bm);
        let mut segments: Vec<Vec<u64>> = Vec::new();
        let mut last = None;
        for (b, (&e, &a)) in expert.iter().zip(&active).enumerate() {
            if a == 0 {
                continue;
            }
            if self.layout == Layout::Contiguous && !segments.is_empty() || last == Some(e) {
                segments.last_mut().expect("a segment is open").push(b as u64);
            } else {
                segments.push(vec![b as u64]);
            }
            last = Some(e);
        }
        let (mut te, mut tm, mut tnv) = (Vec::new(), Vec::new(), Vec::new());
        for seg in &segments {
            let nm = seg.len() as u64;
            let (np, ns) = if multicast_a { (tn, nm) } else { (nm, tn) };
            for block in 0..nm * tn {
                let per = ns * PER_GROUP;
                let first = block / per * PER_GROUP;
                let in_group = block % per;
                let width = PER_GROUP.min(np - first);
                let (prim, sec) = (first + in_group % width, in_group / width);
                let (mi, ni) = if multicast_a { (sec, prim) } else { (prim, sec) };
                let mb = seg[mi as usize];
                te.push(expert[mb as usize]);
                tm.push(mb as i64);
                tnv.push(ni as i64);
            }
        }
        if multicast_a && te.len() % 2 == 1 {
            let k = te.len() - 1;
            te.push(te[k]);
            tm.push(tm[k]);
            tnv.push(tnv[k]);
        }
        hopper::GroupTiles { expert: Arc::from(te), m: Arc::from(tm), n: Arc::from(tnv) }
    }

    /// The expert and whether it computes, per m-block of `bm` rows.
    fn block_tables(&self, bm: u64) -> (Vec<i64>, Vec<i64>) {
        let (mut expert, mut active) = (Vec::new(), Vec::new());
        for (g, &m) in self.m.iter().enumerate() {
            let blocks = match self.layout {
                Layout::Contiguous => m.div_ceil(CONTIGUOUS_ALIGNMENT) * CONTIGUOUS_ALIGNMENT / bm,
                Layout::Masked => self.capacity().div_ceil(bm),
            };
            for b in 0..blocks {
                expert.push(g as i64);
                active.push(i64::from(b * bm < m));
            }
        }
        (expert, active)
    }
}

impl fmt::Display for GroupedProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.m.iter().sum();
        write!(f, "{} groups ({} rows", self.groups(), total)?;
        if self.layout == Layout::Masked {
            write!(f, ", capacity {}", self.capacity())?;
        }
        write!(f, ") x{}x{} {} {}", self.n, self.k, self.dtype, self.layout.name())?;
        if self.block_scaled {
            f.write_str(" block-scaled")?;
        }
        Ok(())
    }
}

/// DeepGEMM's recipe for `p` on `arch` (module documentation).
pub fn grouped_recipe(arch: &Arch, p: &GroupedProblem) -> HopperRecipe {
    let total: u64 = p.m.iter().sum();
    let (bms, hint): (&[u32], u64) = match p.layout {
        Layout::Contiguous => (&[CONTIGUOUS_ALIGNMENT as u32], total),
        // expected_m: the mean valid rows per group.
        Layout::Masked => (&[64, 128], total.div_ceil(p.groups().max(1))),
    };
    let blocks = |bm: u64| p.m_blocks(bm);
    let rule = MulticastRule::OnlyA { even_n_blocks: p.layout == Layout::Masked };
    // bf16: the same selection with 64-element k-blocks (128 bytes, the recipe's bf16 stage).
    let mut r = deepgemm_recipe(arch, &p.dense(bms[0] as u64), bms, &blocks, hint, rule);
    r.persistent = true;
    r.split_k = 1;
    r.epilogue = Epilogue::TmaStore;
    r
}

/// The trace of the grouped GEMM `p` with recipe `r` (one kernel).
pub fn generate_grouped(arch: &Arch, p: &GroupedProblem, r: &HopperRecipe) -> Result<Trace, String> {
    p.validate()?;
    let bm = r.cta_m as u64;
    if bm == 0 || (p.layout == Layout::Contiguous && !CONTIGUOUS_ALIGNMENT.is_multiple_of(bm)) {
        return Err(format!("cta_m = {bm} must divide the contiguous alignment {}", CONTIGUOUS_ALIGNMENT));
    }
    if r.split_k != 1 || r.cluster_m != 1 {
        return Err("a grouped GEMM never splits K and multicasts only A (split_k = 1, cluster_m = 1)".into());
    }
    let dense = p.dense(bm);
    let (mut expert, mut active) = p.block_tables(bm);
    let tm = expert.len() as u64;
    let gx = tm.min(16);
    let padded = (tm.div_ceil(gx) * gx) as usize;
    expert.resize(padded, 0);
    active.resize(padded, 0);
    let tiles = r.persistent.then(|| p.tiles(bm, dense.n.div_ceil(r.cta_n as u64), r.multicast && r.cluster_n > 1));
    let grouping = Grouping {
        groups: p.groups(),
        expert: Arc::from(expert),
        active: Arc::from(active),
        tiles,
        layout: p.layout.name(),
    };
    let pl = hopper::plan_grouped(arch, &dense, r, Some(grouping))?;
    hopper::generate_plan(&dense, r, pl)
}

/// The rows the trace computes: every active m-block's `BLOCK_M` rows (tensor FLOPs executed are
/// `2 · computed_rows · N' · K'`).
pub fn computed_rows(p: &GroupedProblem, r: &HopperRecipe) -> u64 {
    let bm = r.cta_m as u64;
    p.block_tables(bm).1.iter().filter(|&&a| a == 1).count() as u64 * bm
}
