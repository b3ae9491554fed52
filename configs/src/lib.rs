//! # gpusim-configs
//!
//! The chip description: a typed TOML schema, its validation, and the built-in presets.
//!
//! ## Invariant
//! **An [`Arch`] that this crate hands out is a valid chip.** Every parameter was given by the
//! file, by an ancestor it `inherits` from, or by a documented default; each is in its valid
//! range; and the cross-field rules of [`validate()`] hold (warps divide over sub-cores, shared
//! memory fits in the L1 SRAM, L2 sets are whole, ...). `sim-core` may rely on this and never
//! re-checks. Code that builds or edits an `Arch` by hand should call [`validate()`] itself.
//!
//! ## API boundary
//! - In: a preset name ([`load_preset`]), a file ([`load_file`]), either ([`load`]), or text
//!   ([`load_str`]). Nothing else reads files; nothing here prints.
//! - Out: [`Arch`] (arch.rs, the contract with `sim-core`), typed in [`units`], or a
//!   [`ConfigError`] that names the file, line and column and the dotted key, with the nearest
//!   valid key or preset when a name is unknown.
//! - Introspection for the CLI, as data or `String`s: [`presets()`], [`all_params`], [`explain`]
//!   ([`ParamInfo`]), [`to_toml`] (a fully resolved file that loads back to an equal `Arch`),
//!   [`diff`] ([`ParamDiff`]), [`diff_table`], [`presets_table`]; [`param`] (typed kind and
//!   numeric range, [`ParamKind`]).
//! - Edits: [`Arch::with_override`] / [`Arch::with_override_str`] / [`Arch::with_overrides`]
//!   set dotted keys on a chip through the loader (same unit parsing, range checks, key
//!   suggestions and cross-field rules as a file); [`Arch::override_base`] parses the chip once
//!   for many sets ([`OverrideBase`]: a sweep's points); [`Arch::value`] reads one as a number.
//!
//! ## Files
//! `schema.rs` declares every section and parameter once, with description, unit, default and
//! range (`field.rs` holds the declaration macro and the merge/resolve machinery, `value.rs` how
//! each type is written back). `keys.rs` checks a document's keys; `load.rs` reads files and
//! follows `inherits`; `validate.rs` holds the cross-field rules; `presets.rs` embeds
//! `configs/presets/*.toml`, whose every number cites its source.
//!
//! ## Writing a chip
//! ```toml
//! inherits = "h100-sxm5-80gb"   # a preset, or a path relative to this file
//! name = "what-if"
//! [sm]
//! count = 160
//! [l2]
//! size = "128 MiB"
//! slices = 128
//! ```
//! Values carry units as strings (`"1.98 GHz"`, `"3.35 TB/s"`, `"50 MiB"`, `"33 cycles"`,
//! `"120 ns"`, `"128 B/clk"`); bytes, cycles and bytes per cycle may also be bare numbers.

mod aliases;
pub mod arch;
mod descriptive;
mod error;
mod field;
mod introspect;
mod keys;
mod load;
pub mod occupancy;
mod presets;
mod schema;
pub mod units;
mod validate;
mod value;

pub use aliases::{ALIASES, Alias, preset_for_hardware};
pub use arch::*;
pub use descriptive::{DESCRIPTIVE, descriptive};
pub use error::{ConfigError, Loc};
pub use introspect::{ParamDiff, ParamInfo, all_params, diff, diff_table, explain, param, presets_table, to_toml};
pub use load::{OverrideBase, load, load_file, load_preset, load_str};
pub use presets::presets;
pub use units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};
pub use validate::{LAUNCH_MODES, MEMORY_MODELS, POLICIES, validate};
pub use value::ParamKind;
