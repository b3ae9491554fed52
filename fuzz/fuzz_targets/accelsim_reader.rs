//! Arbitrary text through the Accel-Sim `.traceg` importer: it must never panic, and what it
//! accepts must be well formed.
#![no_main]

use gpusim_isa::accelsim::parse_traceg_str;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(k) = parse_traceg_str("fuzz.traceg", text) {
        k.check().expect("accepted kernels are well formed");
    }
});
