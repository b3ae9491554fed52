//! The recipes of the CUDA twins (workloads/cuda/): the fixed kernel designs that
//! `gemm_ampere_sm80.cu` and `gemm_wgmma_sm90a.cu` implement. The instruction-mix test
//! (workloads/tests/cuda_twins.rs) checks each recipe against its twin's compiled SASS; the
//! validation crate simulates a twin's measured runs (`gemm_twin` cases of `gpusim measure`)
//! with the same recipe, so that a twin is compared with its own design and not with the
//! default recipe a tuned library would pick.
//!
//! The grouped-GEMM twin (`grouped_gemm_wgmma_sm90a.cu`, [`grouped_hopper_twin`]) is not a
//! [`Twin`]: a `Twin` is a dense GEMM design. `Twin::ALL` names the `gemm_twin` cases
//! (`gemm-twin-<short>-MxNxK`, validation's `twin_shape`), which correlate simulates as a dense
//! `GemmProblem` through [`super::generate`], and `gpusim measure` launches each twin with dense
//! arguments (validation/src/measure/twins.rs). A grouped twin needs a grouped problem (rows per
//! group, an expert table, a B of `G·N` rows) and [`super::grouped::generate_grouped`], which
//! neither path carries; its recipe stands alone here and only the instruction-mix test uses it.

use super::grouped::{GroupedProblem, Layout};
use super::{AmpereRecipe, Dtype, Epilogue, HopperRecipe, Recipe};

/// One of the CUDA twins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Twin {
    /// cp.async + ldmatrix + mma.sync, any sm_80 or newer part.
    Ampere,
    /// TMA + wgmma, warp-specialised, sm_90a only.
    Hopper,
}

impl Twin {
    pub const ALL: [Twin; 2] = [Twin::Ampere, Twin::Hopper];

    /// The name in the twin's measured case ids (`gemm-twin-<short>-MxNxK`).
    pub fn short(self) -> &'static str {
        match self {
            Twin::Ampere => "mma-sm80",
            Twin::Hopper => "wgmma-sm90a",
        }
    }

    /// The twin a case id names (`gemm-twin-mma-sm80-4096x4096x4096`).
    pub fn from_case_id(id: &str) -> Option<Twin> {
        let rest = id.strip_prefix("gemm-twin-")?;
        Twin::ALL.into_iter().find(|t| rest.strip_prefix(t.short()).is_some_and(|r| r.starts_with('-')))
    }

    /// The twin's design as a recipe.
    pub fn recipe(self) -> Recipe {
        match self {
            // 128×128×32 CTA tile, 8 warps of 64×32 (2 along M × 4 along N), 4 stages, no split-K,
            // no rasterisation swizzle.
            Twin::Ampere => Recipe::Ampere(AmpereRecipe {
                cta_m: 128,
                cta_n: 128,
                cta_k: 32,
                warp_m: 64,
                warp_n: 32,
                stages: 4,
                split_k: 1,
                swizzle: 1,
            }),
            // 128×256×64 CTA tile, 4 stages, 2 consumer warpgroups, no cluster, one output tile per
            // CTA (not persistent), stores straight from the accumulators.
            Twin::Hopper => Recipe::Hopper(HopperRecipe {
                cta_m: 128,
                cta_n: 256,
                cta_k: 64,
                stages: 4,
                consumers: 2,
                cluster_m: 1,
                cluster_n: 1,
                multicast: false,
                persistent: false,
                raster_swizzle: 0,
                split_k: 1,
                epilogue: Epilogue::Direct,
            }),
        }
    }

    /// Whether the twin runs on compute capability `cc` (×10): the Hopper twin needs exactly 90.
    pub fn runs_on(self, cc: u32) -> bool {
        match self {
            Twin::Ampere => cc >= 80,
            Twin::Hopper => cc == 90,
        }
    }
}

/// The recipe of the grouped-GEMM twin (`workloads/cuda/grouped_gemm_wgmma_sm90a.cu`), for
/// [`super::grouped::generate_grouped`]: the Hopper twin's warp specialisation (2 consumer
/// warpgroups, 4 stages, no cluster, one tile per CTA, stores straight from the accumulators) with
/// a 128×128×64 CTA tile, the tile DeepGEMM's bf16 selection ([`super::grouped::grouped_recipe`])
/// picks for [`grouped_twin_problem`]. That selection also multicasts A over a 1×2 cluster, picks
/// more stages and stores through TMA; the twin does none of these, and neither does its recipe.
pub fn grouped_hopper_twin() -> HopperRecipe {
    let Recipe::Hopper(r) = Twin::Hopper.recipe() else { unreachable!("the Hopper twin's recipe is a Hopper recipe") };
    HopperRecipe { cta_n: 128, ..r }
}

/// The grouped twin's reference problem: 8 experts of 256 rows each, N = 4096, K = 7168, bf16,
/// contiguous (a DeepSeek-V3-sized expert GEMM at a small batch).
pub fn grouped_twin_problem() -> GroupedProblem {
    GroupedProblem {
        m: vec![256; 8],
        n: 4096,
        k: 7168,
        dtype: Dtype::Bf16,
        block_scaled: false,
        layout: Layout::Contiguous,
        capacity: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_ids_name_their_twin() {
        assert_eq!(Twin::from_case_id("gemm-twin-mma-sm80-4096x4096x4096"), Some(Twin::Ampere));
        assert_eq!(Twin::from_case_id("gemm-twin-wgmma-sm90a-8192x8192x8192"), Some(Twin::Hopper));
        assert_eq!(Twin::from_case_id("gemm-twin-wgmma-sm90-1x1x1"), None);
        assert_eq!(Twin::from_case_id("gemm-cublas-8192"), None);
    }
}
