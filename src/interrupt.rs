//! Ctrl-C (SIGINT) and SIGTERM as a flag that long commands poll between units of work, so they
//! stop cleanly: finish or abandon the work in flight, keep what is done, exit 130 or 143. A
//! second signal ends the process at once (with the same code), for when waiting is not wanted.
//!
//! `install` once per process, before the work starts; `signal()` is cheap (one atomic load).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The signals received so far, as a pollable flag.
#[derive(Clone)]
pub struct Interrupt {
    signal: Arc<AtomicUsize>,
    /// Raised by the first signal: what a simulation polls (`SimOptions::stop`).
    seen: Arc<AtomicBool>,
}

impl Interrupt {
    /// Registers the handlers for SIGINT and SIGTERM.
    pub fn install() -> std::io::Result<Interrupt> {
        let signal = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // Order matters: the shutdown handler looks at `seen` before the next one sets it,
            // so the first signal only raises the flag and the second one exits.
            flag::register_conditional_shutdown(sig, 128 + sig, seen.clone())?;
            flag::register(sig, seen.clone())?;
            flag::register_usize(sig, signal.clone(), sig as usize)?;
        }
        Ok(Interrupt { signal, seen })
    }

    /// The flag the first signal raises, for `SimOptions::stop`.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.seen.clone()
    }

    /// The signal that asked to stop, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// The exit code for the signal received: 128 + its number (130 for SIGINT, 143 for SIGTERM).
    pub fn exit_code(&self) -> Option<i32> {
        self.signal().map(|s| 128 + s)
    }
}

/// The process's one [`Interrupt`], installed on first use.
static GLOBAL: std::sync::OnceLock<Interrupt> = std::sync::OnceLock::new();

/// The process's [`Interrupt`], its handlers installed on first use: every command shares it.
pub fn global() -> crate::error::CliResult<&'static Interrupt> {
    if let Some(i) = GLOBAL.get() {
        return Ok(i);
    }
    let i = Interrupt::install()
        .map_err(|e| crate::error::CliError::input(format!("cannot install the SIGINT/SIGTERM handlers: {e}")))?;
    Ok(GLOBAL.get_or_init(|| i))
}

/// Installs the handlers (once) and returns the stop flag a simulation polls.
pub fn install() -> crate::error::CliResult<Arc<AtomicBool>> {
    Ok(global()?.stop_flag())
}

/// The exit code for the signal received so far, if any (see [`Interrupt::exit_code`]).
pub fn exit_code() -> Option<i32> {
    GLOBAL.get().and_then(Interrupt::exit_code)
}
