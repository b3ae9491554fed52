//! The one table from a GPU's names to the preset that models it: the names the reference data
//! uses in its `hardware` field ("H100 SXM", "A100 80GB SXM4", ...) and the device names the CUDA
//! driver reports (`nvidia-smi`, `cudaGetDeviceProperties`, ncu's
//! `device__attribute_display_name`: "NVIDIA H100 80GB HBM3", ...). Exact names only; a part no
//! preset models (H100 NVL, GH200, A100 40GB SXM4, ...) has no entry.

/// A name of a GPU and the preset modelling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The name, exactly as the data or the driver spells it.
    pub name: &'static str,
    /// The built-in preset.
    pub preset: &'static str,
    /// Why this preset, where the name alone does not say.
    pub why: &'static str,
}

const fn a(name: &'static str, preset: &'static str, why: &'static str) -> Alias {
    Alias { name, preset, why }
}

/// Every name with a preset, reference-data names first, then driver names.
pub const ALIASES: &[Alias] = &[
    // Reference-data names.
    a("A100 PCIe", "a100-pcie-40gb", ""),
    a("A100 80GB", "a100-sxm4-80gb", ""),
    a("A100 SXM", "a100-sxm4-80gb", ""),
    a("A100 80GB SXM4", "a100-sxm4-80gb", "the SXM4 80 GB part"),
    a("H800 PCIe", "h800-pcie", ""),
    a("H100 PCIe", "h100-pcie", ""),
    a(
        "H800",
        "h800-pcie",
        "the DPX latency case names the H800 without the form factor; its source measured the H800 PCIe (HPMLL)",
    ),
    a("H200 SXM", "h200-sxm", ""),
    a("H100 SXM", "h100-sxm5-80gb", "the SXM5 part"),
    a("H100 80GB SXM5", "h100-sxm5-80gb", "the SXM5 part"),
    a(
        "sm_90 (H100; variant not stated)",
        "h100-sxm5-80gb",
        "XLA's sm_90 table reaches 783 TFLOP/s bf16, above the H100 PCIe's dense peak (756), so an SXM5 part",
    ),
    a("H800 SXM5", "h800-sxm5", "the SXM5 part"),
    // Device names as the CUDA driver reports them.
    a("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb", ""),
    a("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", ""),
    a("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb", ""),
    a("NVIDIA H100 PCIe", "h100-pcie", ""),
    a("NVIDIA H800", "h800-sxm5", ""),
    a("NVIDIA H800 PCIe", "h800-pcie", ""),
    a("NVIDIA H200", "h200-sxm", ""),
];

/// The preset modelling the GPU called `name` (surrounding whitespace ignored), if any.
pub fn preset_for_hardware(name: &str) -> Option<&'static str> {
    let name = name.trim();
    ALIASES.iter().find(|x| x.name == name).map(|x| x.preset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_names_a_built_in_preset_once() {
        let presets: Vec<&str> = crate::presets().iter().map(|(n, _)| *n).collect();
        for (i, x) in ALIASES.iter().enumerate() {
            assert!(presets.contains(&x.preset), "{}: unknown preset {}", x.name, x.preset);
            assert!(ALIASES[..i].iter().all(|y| y.name != x.name), "{} twice", x.name);
            assert_eq!(x.name, x.name.trim());
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(preset_for_hardware("NVIDIA H100 80GB HBM3"), Some("h100-sxm5-80gb"));
        assert_eq!(preset_for_hardware(" NVIDIA H200 \n"), Some("h200-sxm"));
        assert_eq!(preset_for_hardware("H200 SXM"), Some("h200-sxm"));
        assert_eq!(preset_for_hardware("H800"), Some("h800-pcie"));
        assert_eq!(preset_for_hardware("NVIDIA H800"), Some("h800-sxm5"));
        assert_eq!(preset_for_hardware("NVIDIA GeForce RTX 4090"), None);
        assert_eq!(preset_for_hardware("TITAN V"), None);
    }
}
