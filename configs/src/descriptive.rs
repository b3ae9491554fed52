//! Parameters that describe the chip but that no timing model reads, each with the reason.
//! Every other parameter is read by the model; one that stops being read is either modelled
//! again or moves here (sim-core/tests/descriptive_params.rs pins this list and checks that
//! changing a listed parameter leaves results bit-identical). `gpusim arch explain` says so.

/// (dotted key, why the model does not need it).
pub const DESCRIPTIVE: &[(&str, &str)] = &[
    ("hbm.size", "capacity does not set timing; traces carry their own addresses and the model does not bound them"),
    (
        "clocks.memory",
        "DRAM timing comes from `hbm.bandwidth` and the nanosecond HBM timings, not from the interface clock",
    ),
];

/// Why `key` is descriptive, if it is.
pub fn descriptive(key: &str) -> Option<&'static str> {
    DESCRIPTIVE.iter().find(|(k, _)| *k == key).map(|(_, why)| *why)
}
