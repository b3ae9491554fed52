//! Arbitrary text as a chip file: loading with validation must never panic, and a chip that
//! loads (and that `gpusim run` would not refuse for its size) must simulate a small probe
//! kernel to the end or fail with an error — never panic, hang or abort.
#![no_main]

use gpusim_isa::{MemTraceSource, text};
use libfuzzer_sys::fuzz_target;

const PROBE: &str = include_str!("../probe.trace");

fuzz_target!(|data: &[u8]| {
    let Ok(t) = std::str::from_utf8(data) else { return };
    let Ok(arch) = gpusim_configs::load_str("fuzz.toml", t) else { return };
    if gpusim_sim_core::footprint(&arch).total() > 4 << 30 {
        return;
    }
    let probe = text::read_trace("probe", PROBE).expect("the probe reads");
    let mut src = MemTraceSource::new(probe);
    let _ = gpusim_sim_core::simulate(&arch, &mut src, &gpusim_sim_core::SimOptions::default());
});
