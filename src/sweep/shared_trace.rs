//! A trace file read once into memory and replayed by every point of a sweep: the kernels'
//! CTAs (each a list of shared `Arc<Program>`s) behind an `Arc`, handed out by a cheap
//! [`TraceSource`] per run. Any format the one opener (`isa::open`) reads works.

use std::path::Path;
use std::sync::Arc;

use gpusim_isa::{CtaTrace, KernelInfo, KernelSource, OpTable, TraceError, TraceSource};

struct Kernel {
    info: KernelInfo,
    ops: OpTable,
    ctas: Vec<CtaTrace>,
}

/// Every kernel of a trace, read.
pub struct SharedTrace {
    kernels: Vec<Arc<Kernel>>,
}

impl SharedTrace {
    /// Reads the whole trace at `path`; the reader's warnings are returned as text.
    pub fn read(path: &Path) -> Result<(SharedTrace, Vec<String>), TraceError> {
        let (_fmt, mut src) = gpusim_isa::open::open(path)?;
        let mut kernels = Vec::new();
        while let Some(mut k) = src.next_kernel()? {
            let mut ctas = Vec::new();
            while let Some(c) = k.next_cta()? {
                ctas.push(c);
            }
            kernels.push(Arc::new(Kernel { info: k.info().clone(), ops: k.ops().clone(), ctas }));
        }
        let diags = src.take_diagnostics().iter().map(|d| d.to_string()).collect();
        Ok((SharedTrace { kernels }, diags))
    }

    /// A source that replays the trace from its start.
    pub fn source(self: &Arc<Self>) -> SharedSource {
        SharedSource { trace: self.clone(), next: 0 }
    }
}

/// One replay of a [`SharedTrace`].
pub struct SharedSource {
    trace: Arc<SharedTrace>,
    next: usize,
}

impl TraceSource for SharedSource {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        let Some(k) = self.trace.kernels.get(self.next) else { return Ok(None) };
        self.next += 1;
        Ok(Some(Box::new(KernelReplay { kernel: k.clone(), next: 0 })))
    }
}

struct KernelReplay {
    kernel: Arc<Kernel>,
    next: usize,
}

impl KernelSource for KernelReplay {
    fn info(&self) -> &KernelInfo {
        &self.kernel.info
    }
    fn ops(&self) -> &OpTable {
        &self.kernel.ops
    }
    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        let c = self.kernel.ctas.get(self.next).cloned();
        self.next += c.is_some() as usize;
        Ok(c)
    }
    fn detach(&mut self) -> Option<Box<dyn KernelSource>> {
        let rest = KernelReplay { kernel: self.kernel.clone(), next: self.next };
        self.next = self.kernel.ctas.len();
        Some(Box::new(rest))
    }
}
