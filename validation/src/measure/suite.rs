//! What each suite measures: footprints, sizes, shapes, repetitions. Plain data, so that what
//! `--suite quick` costs can be read (and tested) without a GPU.

use crate::case::{DEFAULT_DRAM_CHASE_FOOTPRINT, L1_CHASE_FOOTPRINT, L2_CHASE_FOOTPRINT};

/// `--suite`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    /// A few minutes on an H100/H200: the simulator's canonical footprints and a handful of GEMMs.
    Quick,
    /// Footprint and size sweeps, more GEMM shapes.
    Full,
}

impl Suite {
    pub fn parse(s: &str) -> Result<Suite, String> {
        match s {
            "quick" => Ok(Suite::Quick),
            "full" => Ok(Suite::Full),
            _ => Err(format!("unknown suite `{s}`: use quick or full")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }
}

/// The groups of measurements, in the order they run (`--only` selects some). `gemm` is the
/// cublasGemmEx types, `gemm-fp8` the cuBLASLt fp8 GEMMs: a group of its own because it needs
/// another library (libcublasLt) and compute capability 8.9, so that where either is missing it
/// is skipped or fails alone, with its reason, and the 16-bit GEMMs are still measured.
pub const GROUPS: [&str; 9] = ["chase", "stream", "l2", "smem", "mma", "wgmma", "gemm", "gemm-fp8", "twins"];

/// GEMM data types measured with cuBLAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmType {
    Bf16,
    Fp16,
    /// e4m3 inputs, fp32 accumulation, bf16 output, through cuBLASLt (compute capability 8.9+).
    Fp8,
}

impl GemmType {
    pub fn as_str(self) -> &'static str {
        match self {
            GemmType::Bf16 => "bf16",
            GemmType::Fp16 => "fp16",
            GemmType::Fp8 => "fp8",
        }
    }

    /// The group ([`GROUPS`]) that measures it.
    pub fn group(self) -> &'static str {
        match self {
            GemmType::Bf16 | GemmType::Fp16 => "gemm",
            GemmType::Fp8 => "gemm-fp8",
        }
    }
}

/// The fp8 cases' `dtype` (gemm_fp8.rs). Here, with [`fp8_implementation`], so that a test
/// without a GPU checks that correlate reads them as plain fp8, not DeepGEMM-style block scaling.
pub const FP8_DTYPE: &str = "fp8 e4m3 in, fp32 accumulate, bf16 out";

/// The fp8 cases' `impl`, with the cuBLASLt version.
pub fn fp8_implementation(cublaslt_version: &str) -> String {
    format!(
        "cuBLASLt {cublaslt_version} cublasLtMatmul (CUBLAS_COMPUTE_32F, A/B scale pointers 1.0, FAST_ACCUM off, \
         first heuristic algorithm, 32 MiB workspace)"
    )
}

/// Whether the fp8 GEMM takes an m × n × k problem. cuBLASLt's fp8 kernels want pointers and
/// matrix dimensions with 16-byte alignment (its documented fp8 requirements, after the TN
/// layout): in the TN layout (A k × m with lda = k, B k × n with ldb = k, D m × n with ldd = m)
/// that is k a multiple of 16 (1-byte inputs) and m of 8 (2-byte output); multiples of 16 in all
/// three cover it with room, and every suite shape is one.
pub fn fp8_shape_ok((m, n, k): (u64, u64, u64)) -> bool {
    m > 0 && n > 0 && k > 0 && m.is_multiple_of(16) && n.is_multiple_of(16) && k.is_multiple_of(16)
}

/// mma.sync data types (validation/cuda/mma.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaType {
    F16,
    Bf16,
    Tf32,
    S8,
}

impl MmaType {
    pub const ALL: [MmaType; 4] = [MmaType::F16, MmaType::Bf16, MmaType::Tf32, MmaType::S8];

    /// The kernels' suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            MmaType::F16 => "f16",
            MmaType::Bf16 => "bf16",
            MmaType::Tf32 => "tf32",
            MmaType::S8 => "s8",
        }
    }

    /// (m, n, k) of the instruction.
    pub fn shape(self) -> (u64, u64, u64) {
        match self {
            MmaType::F16 | MmaType::Bf16 => (16, 8, 16),
            MmaType::Tf32 => (16, 8, 8),
            MmaType::S8 => (16, 8, 32),
        }
    }

    /// FLOP (integer operations for s8) per warp-wide instruction: 2·m·n·k.
    pub fn flops(self) -> u64 {
        let (m, n, k) = self.shape();
        2 * m * n * k
    }

    /// The PTX instruction.
    pub fn ptx(self) -> &'static str {
        match self {
            MmaType::F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            MmaType::Bf16 => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            MmaType::Tf32 => "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
            MmaType::S8 => "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
        }
    }

    /// The SASS instruction it compiles to (CUDA 13).
    pub fn sass(self) -> &'static str {
        match self {
            MmaType::F16 => "HMMA.16816.F32",
            MmaType::Bf16 => "HMMA.16816.F32.BF16",
            MmaType::Tf32 => "HMMA.1688.F32.TF32",
            MmaType::S8 => "IMMA.16832.S8.S8",
        }
    }
}

/// Everything a suite measures.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub suite: Suite,
    /// Untimed runs before the timed ones (event-timed benchmarks).
    pub warmups: u32,
    /// Timed runs; the median is reported.
    pub repetitions: u32,
    /// Pointer-chase footprints, bytes (capped at a quarter of the device memory at run time).
    pub chase_footprints: Vec<u64>,
    /// Also chase with `ld.global.cg` (L1 bypassed) at these footprints.
    pub chase_cg_footprints: Vec<u64>,
    /// Timed dependent loads per chase run (at least the chain's length while it is under
    /// `chase_full_cycle_max`, so that L1/L2 chains are walked whole).
    pub chase_steps: u32,
    pub chase_full_cycle_max: u32,
    /// Chase runs per footprint; the median is reported.
    pub chase_repetitions: u32,
    /// STREAM: bytes moved per kernel, in multiples of the L2 size (the simulator's
    /// `STREAM_L2_MULTIPLE`).
    pub stream_l2_multiple: u64,
    /// L2-resident read: data sets as fractions of the L2 size; bytes read per timed kernel
    /// (more than the simulator's 256 MiB, so that a kernel runs long enough to time with events).
    pub l2_fractions: Vec<f64>,
    pub l2_total_bytes: u64,
    /// Shared-memory strides in 32-bit words (1: no bank conflict; 2^c: 2^c-way).
    pub smem_strides: Vec<u32>,
    pub smem_iters: u32,
    pub mma_types: Vec<MmaType>,
    /// mma.sync / wgmma loop iterations per throughput run, and chain length of the latency run.
    pub mma_iters: u32,
    pub mma_latency_chain: u32,
    pub gemm_types: Vec<GemmType>,
    /// (m, n, k) of the cuBLAS GEMMs (every type, fp8 included).
    pub gemm_shapes: Vec<(u64, u64, u64)>,
    /// Shapes the CUDA twins of workloads/cuda run at (multiples of 128 × 256 × 64).
    pub twin_shapes: Vec<(u64, u64, u64)>,
    /// GEMM entries checked against a CPU product per shape.
    pub gemm_check_samples: usize,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Plan {
    pub fn new(suite: Suite) -> Plan {
        match suite {
            Suite::Quick => Plan {
                suite,
                warmups: 3,
                repetitions: 20,
                // The simulator's canonical L1 and L2 chase footprints (memory_cases), its
                // default DRAM footprint, and one far beyond every TLB's reach.
                chase_footprints: vec![L1_CHASE_FOOTPRINT, L2_CHASE_FOOTPRINT, DEFAULT_DRAM_CHASE_FOOTPRINT, 2 * GIB],
                chase_cg_footprints: vec![],
                chase_steps: 1 << 17,
                chase_full_cycle_max: 1 << 18,
                chase_repetitions: 3,
                stream_l2_multiple: 4,
                l2_fractions: vec![0.4],
                l2_total_bytes: 2 * GIB,
                smem_strides: vec![1, 2, 4, 32],
                smem_iters: 4096,
                mma_types: MmaType::ALL.to_vec(),
                mma_iters: 4096,
                mma_latency_chain: 4096,
                // fp8 runs where the device has fp8 tensor cores (8.9+); elsewhere the gemm-fp8
                // group records why it is skipped.
                gemm_types: vec![GemmType::Bf16, GemmType::Fp16, GemmType::Fp8],
                gemm_shapes: vec![(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)],
                twin_shapes: vec![(8192, 8192, 8192)],
                gemm_check_samples: 48,
            },
            Suite::Full => Plan {
                suite,
                warmups: 5,
                repetitions: 50,
                chase_footprints: [
                    8 * KIB,
                    16 * KIB,
                    L1_CHASE_FOOTPRINT,
                    64 * KIB,
                    128 * KIB,
                    192 * KIB,
                    256 * KIB,
                    512 * KIB,
                    MIB,
                    2 * MIB,
                    L2_CHASE_FOOTPRINT,
                    8 * MIB,
                    16 * MIB,
                    24 * MIB,
                    32 * MIB,
                    40 * MIB,
                    48 * MIB,
                    64 * MIB,
                    96 * MIB,
                    128 * MIB,
                    DEFAULT_DRAM_CHASE_FOOTPRINT,
                    512 * MIB,
                    GIB,
                    2 * GIB,
                    4 * GIB,
                    8 * GIB,
                ]
                .to_vec(),
                chase_cg_footprints: vec![L2_CHASE_FOOTPRINT, DEFAULT_DRAM_CHASE_FOOTPRINT],
                chase_steps: 1 << 19,
                chase_full_cycle_max: 1 << 20,
                chase_repetitions: 5,
                stream_l2_multiple: 8,
                l2_fractions: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.7],
                l2_total_bytes: 4 * GIB,
                smem_strides: vec![1, 2, 4, 8, 16, 32],
                smem_iters: 16384,
                mma_types: MmaType::ALL.to_vec(),
                mma_iters: 16384,
                mma_latency_chain: 16384,
                // fp8 runs where the device has fp8 tensor cores (8.9+); elsewhere the gemm-fp8
                // group records why it is skipped.
                gemm_types: vec![GemmType::Bf16, GemmType::Fp16, GemmType::Fp8],
                gemm_shapes: vec![
                    (512, 512, 512),
                    (1024, 1024, 1024),
                    (2048, 2048, 2048),
                    (4096, 4096, 4096),
                    (6144, 6144, 6144),
                    (8192, 8192, 8192),
                    (16384, 16384, 16384),
                    (8192, 8192, 1024),
                    (8192, 1024, 8192),
                    (1024, 8192, 8192),
                    (16384, 4096, 4096),
                    (4096, 16384, 4096),
                    (128, 8192, 8192),
                    (8192, 128, 8192),
                ],
                twin_shapes: vec![(4096, 4096, 4096), (8192, 8192, 8192)],
                gemm_check_samples: 96,
            },
        }
    }
}

/// The `level` of a latency case at `footprint` on a chip with an L2 of `l2_bytes`. The
/// simulator's chase for `L1` and `L2` runs at one fixed footprint each
/// (`memory_cases::{L1,L2}_CHASE_FOOTPRINT`), so only those footprints are named plainly; `DRAM`
/// cases carry their footprint in the locator and are simulated at it. Other footprints are
/// named `... (footprint sweep)`, which correlate lists with the reason it does not simulate them.
pub fn chase_level(footprint: u64, l2_bytes: u64) -> String {
    if footprint == L1_CHASE_FOOTPRINT {
        "L1".into()
    } else if footprint == L2_CHASE_FOOTPRINT && footprint <= l2_bytes / 4 {
        "L2".into()
    } else if footprint >= 3 * l2_bytes {
        "DRAM".into()
    } else if footprint <= 64 * KIB {
        "L1 (footprint sweep)".into()
    } else if footprint < MIB {
        "L1-L2 transition (footprint sweep)".into()
    } else if footprint <= l2_bytes / 2 {
        "L2 (footprint sweep)".into()
    } else {
        "L2-DRAM transition (footprint sweep)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_and_hold_what_the_issue_asks() {
        assert_eq!(Suite::parse("quick"), Ok(Suite::Quick));
        assert_eq!(Suite::parse("full"), Ok(Suite::Full));
        assert!(Suite::parse("fast").unwrap_err().contains("quick or full"));
        for s in [Suite::Quick, Suite::Full] {
            let p = Plan::new(s);
            assert!(p.gemm_shapes.contains(&(8192, 8192, 8192)), "{s:?}");
            assert!(p.gemm_types.contains(&GemmType::Bf16) && p.gemm_types.contains(&GemmType::Fp16));
            assert!(p.gemm_types.contains(&GemmType::Fp8), "{s:?}");
            // cuBLASLt's fp8 kernels need 16-byte leading dimensions: every suite shape has them.
            assert!(p.gemm_shapes.iter().all(|&s| fp8_shape_ok(s)), "{s:?}");
            assert_eq!(p.mma_types.len(), 4);
            assert!(p.repetitions >= 20 && p.warmups >= 1);
            assert!(p.smem_strides.contains(&1) && p.smem_strides.contains(&32));
            // Every twin shape is whole tiles of both twins (128 × 128 × 32 and 128 × 256 × 64).
            for (m, n, k) in &p.twin_shapes {
                assert!(m % 128 == 0 && n % 256 == 0 && k % 64 == 0);
            }
            assert!(p.mma_latency_chain.is_multiple_of(16) && p.chase_steps.is_multiple_of(16));
        }
        assert!(Plan::new(Suite::Quick).gemm_shapes.len() <= 6);
        assert!(Plan::new(Suite::Full).gemm_shapes.len() > Plan::new(Suite::Quick).gemm_shapes.len());
    }

    #[test]
    fn every_gemm_type_has_a_group() {
        for t in [GemmType::Bf16, GemmType::Fp16, GemmType::Fp8] {
            assert!(GROUPS.contains(&t.group()), "{t:?}");
        }
        assert_eq!(GemmType::Fp8.group(), "gemm-fp8");
        assert!(fp8_shape_ok((8192, 128, 8192)));
        assert!(!fp8_shape_ok((1000, 1024, 1024)) && !fp8_shape_ok((1024, 1024, 1000)) && !fp8_shape_ok((0, 16, 16)));
    }
}
