//! Errors a simulation can end with. None of them loses the kernels that already finished:
//! [`SimError::partial`] carries their report.

use std::fmt;

use gpusim_isa::TraceError;

use crate::report::Report;

#[derive(Debug)]
pub enum SimErrorKind {
    /// The trace source failed (malformed or truncated input).
    Trace(TraceError),
    /// A kernel cannot run on this chip (too many threads, registers or shared memory).
    Launch { kernel: String, reason: String },
    /// Nothing retired for too long, or the simulation can never progress again.
    Watchdog { cycle: u64, idle_cycles: u64, stuck: Vec<String> },
    /// The configuration names an unknown model component.
    Config(String),
    /// Stopped on request ([`crate::SimOptions::stop`]) at this cycle.
    Interrupted { cycle: u64 },
}

#[derive(Debug)]
pub struct SimError {
    pub kind: SimErrorKind,
    /// What finished before the error.
    pub partial: Option<Box<Report>>,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SimErrorKind::Trace(e) => write!(f, "{e}"),
            SimErrorKind::Launch { kernel, reason } => write!(f, "kernel `{kernel}` cannot launch: {reason}"),
            SimErrorKind::Config(e) => write!(f, "{e}"),
            SimErrorKind::Interrupted { cycle } => write!(f, "interrupted at cycle {cycle}"),
            SimErrorKind::Watchdog { cycle, idle_cycles, stuck } => {
                write!(f, "watchdog: no warp issued for {idle_cycles} cycles (at cycle {cycle}); stuck warps:")?;
                for s in stuck.iter().take(16) {
                    write!(f, "\n  {s}")?;
                }
                if stuck.len() > 16 {
                    write!(f, "\n  ... and {} more", stuck.len() - 16)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for SimError {}
