//! The harness's CUDA C++ sources (`validation/cuda/*.cu`), embedded in the binary and compiled
//! at run time with NVRTC to a cubin for the device's `sm_XX` (`sm_90a` where wgmma needs it),
//! and the CUDA twins of the GEMM recipes (`workloads/cuda/*.cu`).

/// One source file.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// File name (`chase.cu`), as NVRTC names it in its log.
    pub file: &'static str,
    /// Path from the workspace root.
    pub path: &'static str,
    pub text: &'static str,
    /// Smallest compute capability (major, minor) the file compiles for.
    pub min_cc: (u32, u32),
    /// Needs the architecture-specific target (`sm_90a`): wgmma, setmaxnreg.
    pub arch_specific: bool,
    /// Its `extern "C"` kernels.
    pub kernels: &'static [&'static str],
}

macro_rules! source {
    ($dir:literal, $file:literal, $cc:expr, $a:expr, [$($k:literal),* $(,)?]) => {
        Source {
            file: $file,
            path: concat!($dir, "/", $file),
            text: include_str!(concat!("../../../", $dir, "/", $file)),
            min_cc: $cc,
            arch_specific: $a,
            kernels: &[$($k),*],
        }
    };
}

/// `fill_e4m3` needs compute capability 8.9 (it traps below: the file itself builds for 7.5).
pub const UTIL: Source = source!(
    "validation/cuda",
    "util.cu",
    (7, 5),
    false,
    ["fill_f32", "fill_bf16", "fill_f16", "fill_e4m3", "sm_clock"]
);
pub const CHASE: Source = source!("validation/cuda", "chase.cu", (7, 5), false, ["chase_init", "chase_ca", "chase_cg"]);
pub const STREAM: Source = source!(
    "validation/cuda",
    "stream.cu",
    (7, 5),
    false,
    ["stream_read", "stream_write", "stream_copy", "stream_triad", "l2_read"]
);
pub const SMEM: Source = source!("validation/cuda", "smem.cu", (7, 5), false, ["smem_lds"]);
pub const MMA: Source = source!(
    "validation/cuda",
    "mma.cu",
    (8, 0),
    false,
    [
        "mma_tput_f16",
        "mma_lat_f16",
        "mma_tput_bf16",
        "mma_lat_bf16",
        "mma_tput_tf32",
        "mma_lat_tf32",
        "mma_tput_s8",
        "mma_lat_s8"
    ]
);
pub const WGMMA: Source =
    source!("validation/cuda", "wgmma.cu", (9, 0), true, ["wgmma_tput_bf16", "wgmma_mufu_overlap"]);
pub const TWIN_AMPERE: Source = source!("workloads/cuda", "gemm_mma_sm80.cu", (8, 0), false, ["gemm_mma_sm80"]);
pub const TWIN_HOPPER: Source = source!("workloads/cuda", "gemm_wgmma_sm90a.cu", (9, 0), true, ["gemm_wgmma_sm90a"]);

/// Every source the harness compiles.
pub const ALL: [Source; 8] = [UTIL, CHASE, STREAM, SMEM, MMA, WGMMA, TWIN_AMPERE, TWIN_HOPPER];

/// The NVRTC target for a device: `sm_XY`, or `sm_XYa` for sources that need the
/// architecture-specific features (only 9.0 has them among the devices the harness knows; on
/// others such a source is skipped).
pub fn arch_for(cc: (u32, u32), arch_specific: bool) -> String {
    let a = if arch_specific && cc.0 >= 9 { "a" } else { "" };
    format!("sm_{}{}{a}", cc.0, cc.1)
}

impl Source {
    /// Whether the source can run on a device of compute capability `cc`. The sm_90a sources
    /// run on 9.0 only (the "a" features are not forward compatible).
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        cc >= self.min_cc && (!self.arch_specific || cc == self.min_cc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_defined_in_its_source() {
        for s in ALL {
            for k in s.kernels {
                // Directly or through a macro that pastes the suffix.
                let direct = s.text.contains(&format!("void {k}(")) || s.text.contains(&format!(" {k}("));
                let pasted =
                    k.rsplit_once('_').is_some_and(|(stem, t)| {
                        s.text.contains(&format!("{stem}_##")) && s.text.contains(&format!("({t},"))
                    }) || k.strip_prefix("chase_").is_some_and(|t| s.text.contains(&format!("CHASE_KERNEL({k}, {t})")));
                assert!(direct || pasted, "{}: kernel {k} not found", s.path);
            }
        }
    }

    #[test]
    fn targets() {
        assert_eq!(arch_for((9, 0), true), "sm_90a");
        assert_eq!(arch_for((9, 0), false), "sm_90");
        assert_eq!(arch_for((8, 0), false), "sm_80");
        assert!(WGMMA.runs_on((9, 0)) && !WGMMA.runs_on((10, 0)) && !WGMMA.runs_on((8, 0)));
        assert!(MMA.runs_on((9, 0)) && MMA.runs_on((8, 6)) && !MMA.runs_on((7, 5)));
    }
}
