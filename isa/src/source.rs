//! Streaming access to traces: the simulator pulls kernels, and within a kernel CTAs in launch
//! order, so a trace larger than memory runs in bounded memory.
//!
//! Readers (native text and binary, Accel-Sim) and generators implement these traits. The
//! simulator never does I/O itself: it calls them.

use std::sync::Arc;

use crate::error::TraceError;
use crate::kernel::{CtaTrace, KernelInfo, KernelTrace, OpTable, Trace};
use crate::program::Program;

/// One kernel whose CTAs arrive one at a time.
///
/// Contract: `next_cta` yields each CTA of the grid exactly once, in launch order (linear index,
/// x fastest), then `Ok(None)`. Every op id in a yielded CTA is in `ops()` by the time the CTA is
/// returned; ids already handed out never change meaning.
pub trait KernelSource {
    fn info(&self) -> &KernelInfo;
    fn ops(&self) -> &OpTable;
    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError>;

    /// The rest of this kernel as a source that owns its data, when that costs nothing: an
    /// in-memory kernel, a generator, a kernel read from a file of its own. Afterwards `self`
    /// yields no more CTAs. The engine uses it to keep a kernel running while it pulls later
    /// kernels of the trace (another stream's). `None` (the default) when the rest can only be
    /// had by reading ahead in a shared stream; the engine then reads it with
    /// [`BufferedKernel::drain`], and only when a later kernel must start.
    fn detach(&mut self) -> Option<Box<dyn KernelSource>> {
        None
    }

    /// Skips a run of CTAs that all run the same programs without building each one: from the
    /// next CTA up to (not including) the next one with a layout of its own, at most `max`.
    /// `next_cta` continues after the run. `None` (the default) when the source cannot tell
    /// without building each CTA, or the next CTA has a layout of its own: the caller then uses
    /// `next_cta`. What `gpusim trace info` counts in closed form.
    fn skip_run(&mut self, max: u64) -> Result<Option<CtaRun>, TraceError> {
        let _ = max;
        Ok(None)
    }
}

/// CTAs `first .. first + count` (linear indices), which all run `warps`.
#[derive(Clone, Debug)]
pub struct CtaRun {
    pub first: u64,
    pub count: u64,
    /// Program of warp `w` of each CTA of the run.
    pub warps: Vec<Arc<Program>>,
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

/// The not yet pulled rest of a kernel, read into memory: what the engine keeps of a kernel
/// whose source it must let go of to read later kernels of a sequential trace.
///
/// Held as runs of consecutive CTAs that run the same programs ([`CtaRun`]), so its size is that
/// of the kernel's layout, not of its grid: a softmax kernel of 262,144 one-program CTAs held one
/// `CtaTrace` each came to 70 MB.
pub struct BufferedKernel {
    info: KernelInfo,
    ops: OpTable,
    runs: std::collections::VecDeque<CtaRun>,
    /// The error that ended the reading: handed out after the CTAs read before it, where the
    /// source itself would have returned it.
    error: Option<TraceError>,
}

impl BufferedKernel {
    /// Reads every remaining CTA of `ks`, a run at a time where the source can skip runs. An
    /// error is kept, not returned: the CTAs before it still run, and the error comes when the
    /// consumer reaches it.
    pub fn drain(ks: &mut dyn KernelSource) -> BufferedKernel {
        let grid = ks.info().grid;
        let mut runs: std::collections::VecDeque<CtaRun> = std::collections::VecDeque::new();
        let error = loop {
            let run = match ks.skip_run(u64::MAX) {
                Ok(Some(r)) => r,
                Ok(None) => match ks.next_cta() {
                    Ok(Some(c)) => CtaRun { first: grid.linear(c.coord), count: 1, warps: c.warps },
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                },
                Err(e) => break Some(e),
            };
            if run.count == 0 {
                continue;
            }
            match runs.back_mut() {
                Some(last)
                    if last.first.checked_add(last.count) == Some(run.first)
                        && last.warps.len() == run.warps.len()
                        && last.warps.iter().zip(&run.warps).all(|(a, b)| Arc::ptr_eq(a, b)) =>
                {
                    last.count += run.count
                }
                _ => runs.push_back(run),
            }
        };
        BufferedKernel { info: ks.info().clone(), ops: ks.ops().clone(), runs, error }
    }

    fn end(&self) -> Result<Option<CtaRun>, TraceError> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(None),
        }
    }
}

impl KernelSource for BufferedKernel {
    fn info(&self) -> &KernelInfo {
        &self.info
    }
    fn ops(&self) -> &OpTable {
        &self.ops
    }
    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        let Some(run) = self.runs.front_mut() else { return self.end().map(|_| None) };
        let cta = CtaTrace { coord: self.info.grid.unlinear(run.first), warps: run.warps.clone() };
        run.first += 1;
        run.count -= 1;
        if run.count == 0 {
            self.runs.pop_front();
        }
        Ok(Some(cta))
    }
    fn skip_run(&mut self, max: u64) -> Result<Option<CtaRun>, TraceError> {
        let Some(run) = self.runs.front_mut() else { return self.end() };
        if max == 0 {
            return Ok(None);
        }
        if run.count <= max {
            return Ok(self.runs.pop_front());
        }
        let part = CtaRun { first: run.first, count: max, warps: run.warps.clone() };
        run.first += max;
        run.count -= max;
        Ok(Some(part))
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
    fn skip_run(&mut self, max: u64) -> Result<Option<CtaRun>, TraceError> {
        let k = &self.kernel;
        let total = k.info.num_ctas();
        if self.next >= total || k.layout.overrides.contains_key(&self.next) || max == 0 {
            return Ok(None);
        }
        let end =
            k.layout.overrides.range(self.next..).next().map_or(total, |(&i, _)| i).min(self.next.saturating_add(max));
        let warps = k.layout.default.iter().map(|&p| k.programs[p as usize].clone()).collect();
        let run = CtaRun { first: self.next, count: end - self.next, warps };
        self.next = end;
        Ok(Some(run))
    }
    fn detach(&mut self) -> Option<Box<dyn KernelSource>> {
        let rest = MemKernelSource { kernel: self.kernel.clone(), next: self.next };
        self.next = self.kernel.info.num_ctas();
        Some(Box::new(rest))
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
