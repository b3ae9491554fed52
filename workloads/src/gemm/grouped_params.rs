//! The parameter table of the grouped GEMM ([`crate::params!`]): `gpusim trace grouped-gemm`'s
//! flags are these parameters given another way. Explicit per-group rows (`--m-list`) are a list,
//! which the table's scalar kinds do not hold: the CLI passes them as [`GroupedSpec::m_list`].

use crate::params;
use crate::params::{Field, Param, Value};

use super::Dtype;
use super::grouped::{GroupedProblem, Layout, MAX_GROUPS};
use super::params::DTYPES;

/// The problem as the parameters set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupedSpec {
    pub groups: u64,
    pub m_per_group: u64,
    /// Rows of each group; when not empty it replaces `groups × m_per_group`.
    pub m_list: Vec<u64>,
    pub n: u64,
    pub k: u64,
    pub layout: Layout,
    pub dtype: Dtype,
    /// fp8 only: DeepGEMM's 1×128 / 128×128 block scaling (on by default for fp8).
    pub block_scaled: bool,
    /// Masked capacity per group (0: the largest group).
    pub capacity: u64,
}

impl Default for GroupedSpec {
    fn default() -> Self {
        GroupedSpec {
            groups: 8,
            m_per_group: 4096,
            m_list: Vec::new(),
            n: 4096,
            k: 7168,
            layout: Layout::Contiguous,
            dtype: Dtype::Fp8,
            block_scaled: true,
            capacity: 0,
        }
    }
}

impl GroupedSpec {
    /// The problem (bf16 is never block scaled).
    pub fn problem(&self) -> GroupedProblem {
        let m = if self.m_list.is_empty() { vec![self.m_per_group; self.groups as usize] } else { self.m_list.clone() };
        GroupedProblem {
            m,
            n: self.n,
            k: self.k,
            dtype: self.dtype,
            block_scaled: self.block_scaled && self.dtype == Dtype::Fp8,
            layout: self.layout,
            capacity: self.capacity,
        }
    }
}

pub(crate) const LAYOUTS: &[&str] = &["contiguous", "masked"];

impl Field for Layout {
    fn get(&self) -> Value {
        Value::Choice(self.name())
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Layout::parse(s).unwrap_or(*self);
        }
    }
}

pub const GROUPED: &[Param<GroupedSpec>] = params!(GroupedSpec {
    groups: Int [1, MAX_GROUPS] "groups (experts) in the launch",
    m_per_group: Int [0, 1 << 20] "rows of each group (contiguous: tokens; masked: valid rows)",
    n: Int [1, 1 << 20] "columns of each group's output",
    k: Int [1, 1 << 20] "the reduction dimension",
    layout: Choice(LAYOUTS) "contiguous (rows grouped per expert) or masked (fixed capacity, valid counts)",
    dtype: Choice(DTYPES) "input type: fp8 or bf16",
    block_scaled: Bool "fp8: DeepGEMM 1×128 / 128×128 block scaling",
    capacity: Int [0, 1 << 20] "masked: rows per group the launch is sized for (0: the largest group)",
});
