//! The [`SimOptions`] every simulation of a case runs with: one place, so that a correlation's
//! Ctrl-C reaches the simulations already running, not only the cases not yet started, and so
//! that `correlate --sample` reaches every case runner.
//!
//! `correlate` runs each job on a worker thread with [`with_options`]; case code anywhere below
//! it asks for [`options`]. A thread-local rather than a parameter threaded through every case
//! runner: the stop flag changes no result, only whether a run finishes; sampling is a property
//! of the whole correlation, recorded in its report.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use gpusim_sim_core::{SampleOptions, SimOptions};

thread_local! {
    static OPTS: RefCell<(Option<Arc<AtomicBool>>, Option<SampleOptions>)> = const { RefCell::new((None, None)) };
}

/// The options for a simulation of a case on this thread.
pub fn options() -> SimOptions {
    OPTS.with(|o| {
        let o = o.borrow();
        SimOptions { stop: o.0.clone(), sample: o.1, ..SimOptions::default() }
    })
}

/// Runs `f` with `stop` as the stop flag and `sample` as the sampling of the simulations it
/// starts on this thread.
pub fn with_options<R>(stop: Option<Arc<AtomicBool>>, sample: Option<SampleOptions>, f: impl FnOnce() -> R) -> R {
    let old = OPTS.with(|s| s.replace((stop, sample)));
    let r = f();
    OPTS.with(|s| *s.borrow_mut() = old);
    r
}
