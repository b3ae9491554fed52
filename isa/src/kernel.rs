//! Kernels: launch shape, resources, and the per-CTA warp programs.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::opcode::{OpDesc, decode};
use crate::program::{OpId, Program};

/// A 3-D extent or coordinate (grid, block, cluster, CTA index).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const ONE: Dim3 = Dim3 { x: 1, y: 1, z: 1 };
    pub const ZERO: Dim3 = Dim3 { x: 0, y: 0, z: 0 };

    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    pub const fn count(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// The coordinate of linear index `i` (x fastest), as CUDA orders thread blocks.
    pub const fn unlinear(&self, i: u64) -> Dim3 {
        let x = (i % self.x as u64) as u32;
        let y = ((i / self.x as u64) % self.y as u64) as u32;
        let z = (i / (self.x as u64 * self.y as u64)) as u32;
        Dim3 { x, y, z }
    }

    pub const fn linear(&self, c: Dim3) -> u64 {
        c.x as u64 + self.x as u64 * (c.y as u64 + self.y as u64 * c.z as u64)
    }

    pub const fn as_array(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.x, self.y, self.z)
    }
}

/// Everything about a kernel launch except its instructions.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KernelInfo {
    /// Position in the trace (0-based); dependencies refer to it.
    pub id: u32,
    pub name: String,
    pub grid: Dim3,
    pub block: Dim3,
    /// Thread-block cluster shape (Hopper); `1,1,1` when not clustered.
    pub cluster: Dim3,
    pub regs_per_thread: u32,
    /// Shared memory per CTA in bytes, static plus dynamic.
    pub smem_bytes: u32,
    /// CUDA stream: kernels of one stream run in order.
    pub stream: u32,
    /// Ids of earlier kernels that must finish before this one starts (beyond stream order).
    pub deps: Vec<u32>,
    /// Compute capability the SASS was built for (80, 86, 90, ...); 0 when unknown.
    pub sm_version: u32,
    /// The groups the CTAs belong to (a grouped GEMM's experts), for the report's per-group
    /// times and imbalance; `None` when the kernel has no such grouping.
    pub cta_group: Option<CtaGroup>,
}

/// CTAs of a kernel grouped by the value of one per-CTA parameter: the text form's `group NAME
/// pK` directive. A CTA belongs to group `v` when parameter `p<K>` of its first warp's program
/// evaluates to `v` (0 when that program has fewer parameters). The grouping only labels the
/// CTAs: it changes nothing in how they run.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CtaGroup {
    /// What a group is (`expert`): a token of letters, digits, `_`, `-` or `.`.
    pub name: String,
    /// The parameter's index (`p<param>`), below [`crate::program::MAX_PARAMS`].
    pub param: u8,
}

impl CtaGroup {
    /// Checks the name and the parameter index.
    pub fn check(&self) -> Result<(), String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(ok) {
            return Err(format!(
                "CTA group name `{}` must be 1 to 64 letters, digits, `_`, `-` or `.`",
                self.name.escape_debug()
            ));
        }
        if self.param as usize >= crate::program::MAX_PARAMS {
            return Err(format!(
                "CTA group parameter p{} does not exist (parameters are p0 to p{})",
                self.param,
                crate::program::MAX_PARAMS - 1
            ));
        }
        Ok(())
    }
}

impl KernelInfo {
    pub fn new(id: u32, name: impl Into<String>, grid: Dim3, block: Dim3) -> KernelInfo {
        KernelInfo {
            id,
            name: name.into(),
            grid,
            block,
            cluster: Dim3::ONE,
            regs_per_thread: 32,
            smem_bytes: 0,
            stream: 0,
            deps: Vec::new(),
            sm_version: 0,
            cta_group: None,
        }
    }

    pub fn threads_per_cta(&self) -> u32 {
        self.block.x * self.block.y * self.block.z
    }

    pub fn warps_per_cta(&self) -> u32 {
        self.threads_per_cta().div_ceil(32)
    }

    pub fn num_ctas(&self) -> u64 {
        self.grid.count()
    }
}

/// The opcodes of a kernel, interned: instructions refer to them by [`OpId`].
/// It may grow while a kernel streams in (a later CTA can use a new opcode); ids never change.
#[derive(Clone, Debug, Default)]
pub struct OpTable {
    descs: Vec<OpDesc>,
    index: HashMap<String, OpId>,
}

impl OpTable {
    pub fn new() -> OpTable {
        OpTable::default()
    }

    /// The id of `mnemonic`, decoding and adding it when new.
    /// Fails only when the table already holds 65 536 distinct mnemonics.
    pub fn intern(&mut self, mnemonic: &str) -> Result<OpId, String> {
        if let Some(&id) = self.index.get(mnemonic) {
            return Ok(id);
        }
        let id = OpId::try_from(self.descs.len()).map_err(|_| "more than 65536 distinct opcodes".to_string())?;
        self.descs.push(decode(mnemonic));
        self.index.insert(mnemonic.to_string(), id);
        Ok(id)
    }

    pub fn get(&self, id: OpId) -> &OpDesc {
        &self.descs[id as usize]
    }

    pub fn len(&self) -> usize {
        self.descs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (OpId, &OpDesc)> {
        self.descs.iter().enumerate().map(|(i, d)| (i as OpId, d))
    }
}

impl PartialEq for OpTable {
    fn eq(&self, other: &Self) -> bool {
        self.descs.len() == other.descs.len()
            && self.descs.iter().zip(&other.descs).all(|(a, b)| a.mnemonic == b.mnemonic)
    }
}

/// One CTA ready to run: its coordinate and one program per warp.
#[derive(Clone, Debug)]
pub struct CtaTrace {
    pub coord: Dim3,
    /// Program of warp `w` of the CTA.
    pub warps: Vec<Arc<Program>>,
}

/// Which program each warp of a CTA runs.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct CtaLayout {
    /// Program index (into [`KernelTrace::programs`]) per warp, for every CTA without an override.
    pub default: Vec<u32>,
    /// Per-CTA program indices by linear CTA index, for CTAs that run other programs.
    pub overrides: BTreeMap<u64, Vec<u32>>,
}

/// A whole kernel in memory: what generators build and what the native reader yields.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTrace {
    pub info: KernelInfo,
    pub ops: OpTable,
    pub programs: Vec<Arc<Program>>,
    pub layout: CtaLayout,
}

impl KernelTrace {
    /// The warps' programs of CTA `linear` (an index into the grid, x fastest).
    pub fn cta(&self, linear: u64) -> CtaTrace {
        let idx = self.layout.overrides.get(&linear).unwrap_or(&self.layout.default);
        CtaTrace {
            coord: self.info.grid.unlinear(linear),
            warps: idx.iter().map(|&p| self.programs[p as usize].clone()).collect(),
        }
    }

    /// Checks that the kernel is runnable: programs are well formed, every op id exists, each
    /// CTA has one program per warp, and dependencies point to earlier kernels.
    pub fn check(&self) -> Result<(), String> {
        let warps = self.info.warps_per_cta() as usize;
        if self.info.grid.count() == 0 || self.info.threads_per_cta() == 0 {
            return Err("grid and block must be non-empty".into());
        }
        if let Some(g) = &self.info.cta_group {
            g.check()?;
        }
        for p in &self.programs {
            p.check().map_err(|e| format!("program `{}`: {e}", p.name))?;
            for s in &p.steps {
                if let crate::program::Step::Inst(i) = s
                    && i.op as usize >= self.ops.len()
                {
                    return Err(format!("program `{}`: opcode id {} is not in the table", p.name, i.op));
                }
            }
        }
        let check_layout = |l: &Vec<u32>, what: &str| -> Result<(), String> {
            if l.len() != warps {
                return Err(format!("{what}: {} warp programs for {warps} warps", l.len()));
            }
            if let Some(bad) = l.iter().find(|&&p| p as usize >= self.programs.len()) {
                return Err(format!("{what}: program index {bad} does not exist"));
            }
            Ok(())
        };
        if self.layout.overrides.len() as u64 != self.info.num_ctas() {
            check_layout(&self.layout.default, "default CTA layout")?;
        }
        for (cta, l) in &self.layout.overrides {
            if *cta >= self.info.num_ctas() {
                return Err(format!("CTA {cta} is outside the grid"));
            }
            check_layout(l, &format!("CTA {cta}"))?;
        }
        if let Some(d) = self.info.deps.iter().find(|&&d| d >= self.info.id) {
            return Err(format!("dependency on kernel {d}, which does not come earlier"));
        }
        Ok(())
    }
}

/// A whole trace in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub kernels: Vec<KernelTrace>,
}
