//! # gpusim-configs
//!
//! The chip description: a typed TOML schema, its validation, and the built-in presets.

pub mod arch;
pub mod units;

pub use arch::*;
pub use units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};
