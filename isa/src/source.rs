//! Streaming access to traces: the simulator pulls kernels, and within a kernel CTAs in launch
//! order, so a trace larger than memory runs in bounded memory.
//!
//! Readers (native text and binary, Accel-Sim) and generators implement these traits. The
//! simulator never does I/O itself: it calls them.

use std::sync::Arc;

use crate::error::TraceError;
use crate::kernel::{CtaTrace, KernelInfo, KernelTrace, OpTable, Trace};

/// One kernel whose CTAs arrive one at a time.
///
/// Contract: `next_cta` yields each CTA of the grid exactly once, in launch order (linear index,
/// x fastest), then `Ok(None)`. Every op id in a yielded CTA is in `ops()` by the time the CTA is
/// returned; ids already handed out never change meaning.
pub trait KernelSource {
    fn info(&self) -> &KernelInfo;
    fn ops(&self) -> &OpTable;
    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError>;
}

/// A sequence of kernels.
///
/// Contract: kernels come in launch order; a kernel's `deps` name only earlier kernels.
pub trait TraceSource {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError>;

    /// Warnings gathered so far (ignored lines, ...), handed over once each.
    fn take_diagnostics(&mut self) -> Vec<crate::diag::Diagnostic> {
        Vec::new()
    }
}

/// [`KernelSource`] over a kernel held in memory.
pub struct MemKernelSource {
    kernel: Arc<KernelTrace>,
    next: u64,
}

impl MemKernelSource {
    pub fn new(kernel: Arc<KernelTrace>) -> Self {
        MemKernelSource { kernel, next: 0 }
    }
}

impl KernelSource for MemKernelSource {
    fn info(&self) -> &KernelInfo {
        &self.kernel.info
    }
    fn ops(&self) -> &OpTable {
        &self.kernel.ops
    }
    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        if self.next >= self.kernel.info.num_ctas() {
            return Ok(None);
        }
        let c = self.kernel.cta(self.next);
        self.next += 1;
        Ok(Some(c))
    }
}

/// [`TraceSource`] over a trace held in memory.
pub struct MemTraceSource {
    kernels: std::vec::IntoIter<Arc<KernelTrace>>,
}

impl MemTraceSource {
    pub fn new(trace: Trace) -> Self {
        MemTraceSource { kernels: trace.kernels.into_iter().map(Arc::new).collect::<Vec<_>>().into_iter() }
    }
}

impl TraceSource for MemTraceSource {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        Ok(self.kernels.next().map(|k| Box::new(MemKernelSource::new(k)) as Box<dyn KernelSource>))
    }
}
