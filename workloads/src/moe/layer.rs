//! A whole MoE layer as one trace: a DAG of kernels (built with petgraph, written in a
//! topological order with each kernel's dependencies), routed experts on stream 0 and the shared
//! experts, when there are any, on stream 1.
//!
//! ```text
//! router GEMM (T×E×H, bf16) → top-k softmax → permute → gate/up GEMM (N = 2I, K = H)
//!   → SiLU×up → down GEMM (N = H, K = I) → un-permute + weighted combine
//! shared experts (stream 1): gate/up GEMM (T × 2·I·S × H) → SiLU×up → down GEMM ──→ combine
//! ```
//! - `deepgemm` recipe: the permutation is a gather of each token's row into the expert-grouped
//!   A (`T·topk` rows), the expert GEMMs DeepGEMM's M-grouped GEMMs (contiguous, or masked with
//!   a capacity of the busiest expert), SiLU×up its own kernel (as in DeepSeek's inference code).
//! - `fused` recipe (vLLM/SGLang Triton `fused_moe`, notes §7): `moe_align_block_size` builds the
//!   sorted token ids; the expert GEMMs are Triton's `fused_moe_kernel` ([`super::fused_moe`])
//!   over token blocks sorted by expert, each block reading its expert id from a table, every
//!   expert's tokens padded to BLOCK_M (vLLM's default configuration unless the layer sets one),
//!   `silu_and_mul` between them, `moe_sum` last (the router weights are applied in GEMM2's
//!   epilogue: no extra kernel).
//!
//! Simulator conventions: the small kernels are memory streams of the bytes they move
//! (`crate::streaming`). Each kernel's tensors sit in their own 1 TiB window of the address space,
//! so no kernel hits in L2 on another's data (real layers reuse the activations they just wrote,
//! a few MB; the expert weights, which dominate, are distinct anyway).

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};

use gpusim_configs::Arch;
use gpusim_isa::{KernelTrace, Program, Trace};

use super::fused_moe::{FusedMoeGemm, TritonConfig, generate_fused_moe};
use super::routing::{Routing, expert_counts};
use crate::gemm::grouped::{GroupedProblem, Layout, generate_grouped, grouped_recipe};
use crate::gemm::{Dtype, GemmProblem, default_recipe, generate};
use crate::streaming::{Stream, stream_kernel};

/// Which kernels implement the experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeRecipe {
    Fused,
    DeepGemm,
}

impl MoeRecipe {
    pub fn parse(s: &str) -> Option<MoeRecipe> {
        match s.to_ascii_lowercase().as_str() {
            "fused" | "triton" | "fused_moe" => Some(MoeRecipe::Fused),
            "deepgemm" => Some(MoeRecipe::DeepGemm),
            _ => None,
        }
    }
}

/// A MoE layer.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeLayer {
    pub tokens: u64,
    pub experts: u64,
    pub topk: u64,
    pub hidden: u64,
    pub intermediate: u64,
    pub shared_experts: u64,
    pub recipe: MoeRecipe,
    pub layout: Layout,
    pub routing: Routing,
    pub seed: u64,
    /// fp8 (block scaled / w8a8) or bf16.
    pub dtype: Dtype,
    /// The fused recipe's Triton configuration (`BLOCK_SIZE_M/N/K`, `GROUP_SIZE_M`, `num_warps`,
    /// `num_stages`); each left 0 takes vLLM's default ([`TritonConfig::vllm_default`]).
    pub block_m: u64,
    pub block_n: u64,
    pub block_k: u64,
    pub group_size_m: u64,
    pub num_warps: u64,
    pub num_stages: u64,
}

/// The trace of a layer and what it was built from.
#[derive(Clone, Debug)]
pub struct LayerTrace {
    pub trace: Trace,
    /// Tokens routed to each expert.
    pub counts: Vec<u64>,
    /// Which kernel (by id) is which step (`router`, `gate_up`, ...).
    pub roles: Vec<(u32, &'static str)>,
    /// Bytes of the routed experts' weights that at least one token needs.
    pub expert_weight_bytes_hit: u64,
}

struct Node {
    role: &'static str,
    stream: u32,
    kernels: Vec<KernelTrace>,
}

/// Each kernel's tensors live at `REGION_BASE` and above; shift them to window `w`.
fn relocate(k: &mut KernelTrace, w: u64) {
    const GLOBAL: u64 = 0x7f00_0000_0000;
    for p in &mut k.programs {
        let mut q: Program = (**p).clone();
        for e in &mut q.exprs {
            if e.base >= GLOBAL {
                e.base += w << 40;
            }
        }
        *p = std::sync::Arc::new(q);
    }
}

fn gemm_node(arch: &Arch, role: &'static str, stream: u32, p: GemmProblem) -> Result<Node, String> {
    let r = default_recipe(arch, &p);
    let t = generate(arch, &p, &r).map_err(|e| format!("{role} GEMM {p}: {e}"))?;
    Ok(Node { role, stream, kernels: t.kernels })
}

fn stream_node(role: &'static str, stream: u32, s: Stream, sm: u32) -> Result<Node, String> {
    Ok(Node { role, stream, kernels: vec![stream_kernel(&s, sm)?] })
}

impl MoeLayer {
    pub fn validate(&self) -> Result<(), String> {
        for (name, v, max) in [
            ("tokens", self.tokens, 1u64 << 20),
            ("experts", self.experts, 4096),
            ("hidden", self.hidden, 1 << 16),
            ("intermediate", self.intermediate, 1 << 16),
        ] {
            if v == 0 || v > max {
                return Err(format!("{name} = {v} must be between 1 and {max}"));
            }
        }
        if self.topk == 0 || self.topk > self.experts {
            return Err(format!("topk = {} must be between 1 and experts = {}", self.topk, self.experts));
        }
        if self.shared_experts > 64 {
            return Err(format!("shared experts = {} must be at most 64", self.shared_experts));
        }
        if !matches!(self.dtype, Dtype::Fp8 | Dtype::Bf16) {
            return Err(format!("dtype {}: the MoE layer takes fp8 or bf16", self.dtype));
        }
        let triton = [self.block_m, self.block_n, self.block_k, self.group_size_m, self.num_warps, self.num_stages];
        if self.recipe == MoeRecipe::DeepGemm && triton.iter().any(|&v| v != 0) {
            return Err("block_m, block_n, block_k, group_size_m, num_warps and num_stages configure the fused \
                        recipe's Triton kernel (--recipe fused)"
                .into());
        }
        if self.recipe == MoeRecipe::Fused && self.layout == Layout::Masked {
            return Err("the masked layout is DeepGEMM's (--recipe deepgemm)".into());
        }
        Ok(())
    }

    fn grouped(&self, counts: &[u64], n: u64, k: u64) -> GroupedProblem {
        GroupedProblem {
            m: counts.to_vec(),
            n,
            k,
            dtype: self.dtype,
            block_scaled: self.dtype == Dtype::Fp8,
            layout: self.layout,
            capacity: 0,
        }
    }

    /// The Triton configuration in effect: the layer's, vLLM's default for every field left 0.
    pub fn triton_config(&self) -> TritonConfig {
        let d = TritonConfig::vllm_default(self.dtype, self.dtype == Dtype::Fp8, self.tokens, self.experts);
        let pick = |v: u64, dv: u64| if v == 0 { dv } else { v };
        TritonConfig {
            block_m: pick(self.block_m, d.block_m),
            block_n: pick(self.block_n, d.block_n),
            block_k: pick(self.block_k, d.block_k),
            group_m: pick(self.group_size_m, d.group_m),
            warps: pick(self.num_warps, d.warps),
            stages: pick(self.num_stages, d.stages),
        }
    }

    /// One of the fused recipe's two GEMMs (GEMM1 gathers `hidden` rows at `sorted_id / topk`,
    /// GEMM2 reads its own rows and applies the router weight).
    fn fused(&self, counts: &[u64], n: u64, k: u64, second: bool) -> FusedMoeGemm {
        FusedMoeGemm {
            counts: counts.to_vec(),
            tokens: self.tokens,
            topk: self.topk,
            a_div: if second { 1 } else { self.topk },
            n,
            k,
            dtype: self.dtype,
            block_scaled: self.dtype == Dtype::Fp8,
            mul_routed_weight: second,
        }
    }
}

/// The layer's trace on `arch` (see the module documentation).
pub fn generate_layer(arch: &Arch, l: &MoeLayer) -> Result<LayerTrace, String> {
    l.validate()?;
    let counts = expert_counts(l.tokens, l.experts, l.topk, &l.routing, l.seed)?;
    let sm = 90;
    let (t, e, h, i) = (l.tokens, l.experts, l.hidden, l.intermediate);
    let elt = l.dtype.bytes();
    let rows = t * l.topk;
    let mut g: DiGraph<Node, ()> = DiGraph::new();
    let add = |g: &mut DiGraph<Node, ()>, n: Node, after: &[NodeIndex]| {
        let x = g.add_node(n);
        for &a in after {
            g.add_edge(a, x, ());
        }
        x
    };
    let router = add(&mut g, gemm_node(arch, "router", 0, GemmProblem::new(t, e, h, Dtype::Bf16))?, &[]);
    let s = Stream {
        name: "topk_softmax",
        src: 0x7f00_0000_0000,
        read: t * e * 4,
        dst: 0x7f10_0000_0000,
        write: rows * 8,
        ffma: 4,
        exp: true,
    };
    let topk = add(&mut g, stream_node("topk", 0, s, sm)?, &[router]);
    let permute = match l.recipe {
        MoeRecipe::DeepGemm => Stream {
            name: "moe_permute_gather",
            src: 0x7f00_0000_0000,
            read: rows * h * elt,
            dst: 0x7f10_0000_0000,
            write: rows * h * elt,
            ffma: 0,
            exp: false,
        },
        MoeRecipe::Fused => Stream {
            name: "moe_align_block_size",
            src: 0x7f00_0000_0000,
            read: rows * 4,
            dst: 0x7f10_0000_0000,
            write: (rows + e * (l.triton_config().block_m - 1)) * 4,
            ffma: 1,
            exp: false,
        },
    };
    let permute = add(&mut g, stream_node("permute", 0, permute, sm)?, &[topk]);
    let grouped_node = |role: &'static str, p: GroupedProblem| -> Result<Node, String> {
        let r = grouped_recipe(arch, &p);
        let t = generate_grouped(arch, &p, &r).map_err(|e| format!("{role} grouped GEMM {p}: {e}"))?;
        Ok(Node { role, stream: 0, kernels: t.kernels })
    };
    let cfg = l.triton_config();
    let fused_node = |role: &'static str, p: FusedMoeGemm| -> Result<Node, String> {
        let k = generate_fused_moe(arch, &p, &cfg).map_err(|e| format!("{role} fused_moe {cfg:?}: {e}"))?;
        Ok(Node { role, stream: 0, kernels: vec![k] })
    };
    // GEMM1's output rows: DeepGEMM's padded m-blocks, or the routed rows (fused_moe stores
    // only the valid ones).
    let (gate_up, act_rows) = match l.recipe {
        MoeRecipe::DeepGemm => {
            let p = l.grouped(&counts, 2 * i, h);
            let padded = p.m_blocks(64) * 64;
            (grouped_node("gate_up", p)?, padded)
        }
        MoeRecipe::Fused => (fused_node("gate_up", l.fused(&counts, 2 * i, h, false))?, rows),
    };
    let gate_up = add(&mut g, gate_up, &[permute]);
    let act = Stream {
        name: "silu_and_mul",
        src: 0x7f00_0000_0000,
        read: act_rows * 2 * i * 2,
        dst: 0x7f10_0000_0000,
        write: act_rows * i * elt,
        ffma: 2,
        exp: true,
    };
    let act = add(&mut g, stream_node("activation", 0, act, sm)?, &[gate_up]);
    let down = match l.recipe {
        MoeRecipe::DeepGemm => grouped_node("down", l.grouped(&counts, h, i))?,
        MoeRecipe::Fused => fused_node("down", l.fused(&counts, h, i, true))?,
    };
    let down = add(&mut g, down, &[act]);
    let mut before_combine = vec![down];
    if l.shared_experts > 0 {
        let si = i * l.shared_experts;
        let dense = |m, n, k| GemmProblem { block_scaled: l.dtype == Dtype::Fp8, ..GemmProblem::new(m, n, k, l.dtype) };
        let su = add(&mut g, gemm_node(arch, "shared_gate_up", 1, dense(t, 2 * si, h))?, &[]);
        let sa = Stream {
            name: "shared_silu_and_mul",
            src: 0x7f00_0000_0000,
            read: t * 2 * si * 2,
            dst: 0x7f10_0000_0000,
            write: t * si * elt,
            ffma: 2,
            exp: true,
        };
        let sa = add(&mut g, stream_node("shared_activation", 1, sa, sm)?, &[su]);
        let sd = add(&mut g, gemm_node(arch, "shared_down", 1, dense(t, h, si))?, &[sa]);
        before_combine.push(sd);
    }
    let combine = Stream {
        name: if l.recipe == MoeRecipe::Fused { "moe_sum" } else { "moe_unpermute_combine" },
        src: 0x7f00_0000_0000,
        read: rows * h * 2,
        dst: 0x7f10_0000_0000,
        write: t * h * 2,
        ffma: 1,
        exp: false,
    };
    add(&mut g, stream_node("combine", 0, combine, sm)?, &before_combine);

    // Topological order; stream 0's nodes keep their order, stream 1's follow the graph.
    let order = toposort(&g, None).map_err(|_| "the layer's graph has a cycle".to_string())?;
    let mut last_id = vec![0u32; g.node_count()];
    let mut kernels: Vec<KernelTrace> = Vec::new();
    let mut roles = Vec::new();
    for (w, &x) in order.iter().enumerate() {
        let preds: Vec<u32> =
            g.neighbors_directed(x, petgraph::Direction::Incoming).map(|p| last_id[p.index()]).collect();
        let node = &g[x];
        let base = kernels.len() as u32;
        for (j, k) in node.kernels.iter().enumerate() {
            let mut k = k.clone();
            let old = k.info.id;
            k.info.id = base + j as u32;
            k.info.stream = node.stream;
            // Dependencies inside the node (a split-K reduction on its GEMM) keep their offsets.
            let mut deps: Vec<u32> = k.info.deps.iter().map(|&d| base + d - (old - j as u32)).collect();
            if j == 0 {
                deps.extend(preds.iter().copied());
            }
            deps.sort_unstable();
            deps.dedup();
            k.info.deps = deps;
            relocate(&mut k, w as u64 + 1);
            roles.push((k.info.id, node.role));
            kernels.push(k);
        }
        last_id[x.index()] = kernels.len() as u32 - 1;
    }
    let hit = counts.iter().filter(|&&c| c > 0).count() as u64;
    Ok(LayerTrace { trace: Trace { kernels }, counts, roles, expert_weight_bytes_hit: hit * 3 * h * i * elt })
}
