//! The [`SimOptions`] every simulation of a case runs with: one place, so that a correlation's
//! Ctrl-C reaches the simulations already running, not only the cases not yet started.
//!
//! `correlate` runs each job on a worker thread with [`with_stop`]; case code anywhere below it
//! asks for [`options`]. A thread-local rather than a parameter threaded through every case
//! runner: the stop flag changes no result, only whether a run finishes.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use gpusim_sim_core::SimOptions;

thread_local! {
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// The options for a simulation of a case on this thread.
pub fn options() -> SimOptions {
    SimOptions { stop: STOP.with(|s| s.borrow().clone()), ..SimOptions::default() }
}

/// Runs `f` with `stop` as the stop flag of the simulations it starts on this thread.
pub fn with_stop<R>(stop: Option<Arc<AtomicBool>>, f: impl FnOnce() -> R) -> R {
    let old = STOP.with(|s| s.replace(stop));
    let r = f();
    STOP.with(|s| *s.borrow_mut() = old);
    r
}
