//! Warnings with stable codes. Readers collect them; the CLI prints them once each with a count.

use crate::error::Location;

/// An opcode that is not in the table. It runs with the `misc` class defaults and is counted
/// in the report.
pub const UNKNOWN_OPCODE: &str = "W001";
/// An Accel-Sim line or header key that the importer does not use and skipped.
pub const IGNORED_LINE: &str = "W002";
/// A trace that declares an `sm_version` the chip config does not match.
pub const ARCH_MISMATCH: &str = "W003";

/// One warning.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Diagnostic {
    pub code: &'static str,
    pub at: Location,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "warning[{}]: {}: {}", self.code, self.at, self.message)
    }
}
