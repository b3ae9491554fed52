//! Progress on stderr for long commands (indicatif), drawn only when stderr is a terminal and
//! `--quiet` is not given; otherwise every call is a no-op and nothing is printed.

use std::io::IsTerminal;
use std::time::Duration;

use gpusim_isa::KernelInfo;
use gpusim_sim_core::{CtaEvent, Observer};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner (unknown total) or a bar (known total) on stderr, or nothing.
pub fn bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} (ETA {eta})").expect("a valid template"),
        ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
            .with_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("a valid template")),
    };
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// `gpusim run`'s progress: kernels and CTAs done (a lazy trace has no known total).
pub struct RunProgress {
    bar: ProgressBar,
    kernels: u64,
    ctas: u64,
}

impl RunProgress {
    pub fn new(quiet: bool) -> RunProgress {
        RunProgress { bar: bar(None, quiet), kernels: 0, ctas: 0 }
    }
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
    fn show(&self) {
        self.bar.set_message(format!("{} kernels, {} CTAs done", self.kernels, self.ctas));
    }
}

impl Observer for RunProgress {
    fn kernel_end(&mut self, _k: &KernelInfo, _cycle: u64) {
        self.kernels += 1;
        self.show();
    }
    fn cta_retire(&mut self, _e: &CtaEvent) {
        self.ctas += 1;
        if self.ctas.is_multiple_of(256) {
            self.show();
        }
    }
}
