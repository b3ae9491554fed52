//! Arbitrary text as a chip file: loading with validation must never panic, and a chip that
//! loads (and that `gpusim run` would not refuse for its size) must simulate a small probe
//! kernel to the end or fail with an error — never panic, hang or abort.
#![no_main]

use gpusim_isa::{MemTraceSource, text};
use libfuzzer_sys::fuzz_target;

const PROBE: &str = "gpusim-trace 1
kernel probe
  grid 4 1 1
  block 64 1 1
  smem 1024
  program p
    S2R R0
    IMAD.WIDE R2x2 <- R0 R9
    LDG.E R4 <- R2x2 addr=0x10000+256*cta.x+128*warp
    FFMA R7 <- R4 R4 R4
    STS <- R5 R7 addr=0+128*warp
    BAR.SYNC
    LDS R6 <- R5 addr=0+4*warp
    STG.E <- R2x2 R6 addr=0x20000+256*cta.x+128*warp
    EXIT
  end
  warps 0..1 p
end
";

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
