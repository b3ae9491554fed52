//! The CLI's error type: every failure the user can cause exits with code 2 and one clear message.

use std::fmt;

/// A user-facing failure. `Display` is the whole message printed after `error: `.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: i32,
}

impl CliError {
    /// Bad input: a missing or malformed file, an invalid config, an impossible request.
    pub fn input(message: impl Into<String>) -> CliError {
        CliError { message: message.into(), code: 2 }
    }

    /// Stopped by a signal: exit code 128 + its number (130 for SIGINT, 143 for SIGTERM).
    pub fn interrupted(message: impl Into<String>, code: i32) -> CliError {
        CliError { message: message.into(), code }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<gpusim_isa::TraceError> for CliError {
    fn from(e: gpusim_isa::TraceError) -> Self {
        CliError::input(e.to_string())
    }
}

impl From<gpusim_configs::ConfigError> for CliError {
    fn from(e: gpusim_configs::ConfigError) -> Self {
        CliError::input(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
