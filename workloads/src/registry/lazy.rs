//! Generators that hand out CTAs on demand: [`LazyKernel`] (a [`KernelSource`] that owns its
//! programs and computes each CTA's [`CtaTrace`] from a layout function) and [`LazySource`] (a
//! [`TraceSource`] over kernels built one at a time, when the simulator asks for the next). A
//! kernel source owns its data and borrows nothing from the trace source, so a trace of many
//! long kernels never exists in memory whole.

use std::collections::VecDeque;
use std::sync::Arc;

use gpusim_isa::{
    CtaLayout, CtaTrace, KernelInfo, KernelSource, KernelTrace, Location, OpTable, Program, Trace, TraceError,
    TraceErrorKind, TraceSource,
};

/// Which programs (indices into the kernel's) the warps of CTA `linear` run.
pub type LayoutFn = Arc<dyn Fn(u64) -> Vec<u32> + Send + Sync>;

/// One kernel whose CTAs are computed when asked for.
pub struct LazyKernel {
    info: KernelInfo,
    ops: OpTable,
    programs: Arc<[Arc<Program>]>,
    layout: LayoutFn,
    next: u64,
}

impl LazyKernel {
    pub fn new(info: KernelInfo, ops: OpTable, programs: Vec<Arc<Program>>, layout: LayoutFn) -> LazyKernel {
        LazyKernel { info, ops, programs: programs.into(), layout, next: 0 }
    }

    /// The kernel of `k`, with its CTA layout (a default and overrides) as the layout function.
    pub fn from_kernel(k: KernelTrace) -> LazyKernel {
        let CtaLayout { default, overrides } = k.layout;
        let layout: LayoutFn = Arc::new(move |i| overrides.get(&i).unwrap_or(&default).clone());
        LazyKernel::new(k.info, k.ops, k.programs, layout)
    }
}

impl KernelSource for LazyKernel {
    fn info(&self) -> &KernelInfo {
        &self.info
    }

    fn ops(&self) -> &OpTable {
        &self.ops
    }

    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        if self.next >= self.info.num_ctas() {
            return Ok(None);
        }
        let linear = self.next;
        self.next += 1;
        let mut warps = Vec::new();
        for p in (self.layout)(linear) {
            let prog = self.programs.get(p as usize).ok_or_else(|| {
                TraceError::new(
                    TraceErrorKind::Invalid,
                    Location { file: "generated".into(), line: 0, col: 0 },
                    format!("kernel `{}`: CTA {linear} names program {p}, which does not exist", self.info.name),
                )
            })?;
            warps.push(prog.clone());
        }
        Ok(Some(CtaTrace { coord: self.info.grid.unlinear(linear), warps }))
    }

    /// Free: the rest is the same programs and layout from the next CTA on.
    fn detach(&mut self) -> Option<Box<dyn KernelSource>> {
        let rest = LazyKernel {
            info: self.info.clone(),
            ops: self.ops.clone(),
            programs: self.programs.clone(),
            layout: self.layout.clone(),
            next: self.next,
        };
        self.next = self.info.num_ctas();
        Some(Box::new(rest))
    }
}

/// Builds one kernel when the trace source reaches it.
pub type KernelFn = Box<dyn FnOnce() -> Result<LazyKernel, TraceError> + Send>;

/// A trace source over kernels built one at a time.
pub struct LazySource {
    kernels: VecDeque<KernelFn>,
}

impl LazySource {
    pub fn new(kernels: Vec<KernelFn>) -> LazySource {
        LazySource { kernels: kernels.into() }
    }

    /// The kernels of a materialised trace, handed out CTA by CTA.
    pub fn from_trace(t: Trace) -> LazySource {
        LazySource::new(
            t.kernels.into_iter().map(|k| Box::new(move || Ok(LazyKernel::from_kernel(k))) as KernelFn).collect(),
        )
    }
}

impl TraceSource for LazySource {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        match self.kernels.pop_front() {
            None => Ok(None),
            Some(build) => Ok(Some(Box::new(build()?) as Box<dyn KernelSource>)),
        }
    }
}
