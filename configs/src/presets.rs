//! The built-in chips, embedded from `configs/presets/*.toml`.

use std::sync::OnceLock;

/// Name and text of every built-in preset, in the order `presets()` lists them.
static PRESETS: &[(&str, &str)] = &[
    ("a100-sxm4-80gb", include_str!("../presets/a100-sxm4-80gb.toml")),
    ("a100-pcie-40gb", include_str!("../presets/a100-pcie-40gb.toml")),
    ("h100-sxm5-80gb", include_str!("../presets/h100-sxm5-80gb.toml")),
    ("h100-pcie", include_str!("../presets/h100-pcie.toml")),
    ("h800-sxm5", include_str!("../presets/h800-sxm5.toml")),
    ("h800-pcie", include_str!("../presets/h800-pcie.toml")),
    ("h200-sxm", include_str!("../presets/h200-sxm.toml")),
    // Calibrated by `gpusim calibrate` (scripts/calibrate-presets.sh): each inherits its preset
    // and sets only fitted model parameters, with the cases and cross-validated error.
    ("a100-sxm4-80gb-calibrated", include_str!("../presets/a100-sxm4-80gb-calibrated.toml")),
    ("h100-sxm5-80gb-calibrated", include_str!("../presets/h100-sxm5-80gb-calibrated.toml")),
    ("h800-sxm5-calibrated", include_str!("../presets/h800-sxm5-calibrated.toml")),
    ("h200-sxm-calibrated", include_str!("../presets/h200-sxm-calibrated.toml")),
    ("h800-pcie-calibrated", include_str!("../presets/h800-pcie-calibrated.toml")),
    ("a100-pcie-40gb-calibrated", include_str!("../presets/a100-pcie-40gb-calibrated.toml")),
    ("h100-pcie-calibrated", include_str!("../presets/h100-pcie-calibrated.toml")),
];

/// The TOML text of a preset.
pub(crate) fn text(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names of every preset.
pub(crate) fn names() -> Vec<String> {
    PRESETS.iter().map(|(n, _)| n.to_string()).collect()
}

/// Where a preset's text lives in the repository, for error locations.
pub(crate) fn display_path(name: &str) -> String {
    format!("configs/presets/{name}.toml")
}

/// Every built-in preset: `(name, description)`. The description is the preset's own
/// `description` key.
pub fn presets() -> &'static [(&'static str, &'static str)] {
    static LIST: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    LIST.get_or_init(|| {
        PRESETS
            .iter()
            .map(|&(name, text)| {
                let description = toml::from_str::<toml::Table>(text)
                    .ok()
                    .and_then(|t| t.get("description").and_then(|d| d.as_str()).map(str::to_string))
                    .unwrap_or_default();
                // Built once per process; the strings live as long as the program.
                (name, &*description.leak())
            })
            .collect()
    })
}
