//! The streaming machinery shared by the text and the binary reader.
//!
//! A format parser reads a kernel's head (info, opcodes, kernel-level programs, default layout)
//! and then its `cta` sections one at a time. [`Streamer`] turns that into the
//! [`TraceSource`]/[`KernelSource`] contract: CTAs in linear order, a section read only when the
//! CTA before it has been handed out, and the unread rest of a kernel skipped when the next kernel
//! is asked for. [`collect`] gathers everything into a [`Trace`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Location, TraceError, TraceErrorKind};
use crate::kernel::{CtaLayout, CtaTrace, KernelInfo, KernelTrace, OpTable, Trace};
use crate::program::Program;
use crate::source::{CtaRun, KernelSource};

/// A kernel up to its first `cta` section.
pub(crate) struct KernelHead {
    pub info: KernelInfo,
    pub ops: OpTable,
    /// Kernel-level programs, visible to every section.
    pub programs: Vec<Arc<Program>>,
    /// Program index per warp for CTAs without a section; empty when every CTA has one.
    pub default: Vec<u32>,
    /// Where the kernel starts, for errors about the kernel as a whole.
    pub at: Location,
}

/// One `cta` section: a CTA that runs other programs than the default layout.
pub(crate) struct Section {
    pub linear: u64,
    /// Programs defined inside the section.
    pub locals: Vec<Arc<Program>>,
    /// Per warp: a kernel-level program index (< `programs.len()`), or `programs.len() + i` for
    /// the section's local program `i`.
    pub warps: Vec<u32>,
}

/// A format's parser. Sections come in ascending CTA order, inside the grid, each with one
/// valid program per warp; parsers check that and report it at the section's location.
pub(crate) trait Parser {
    /// The next kernel's head, or `None` at the end of the trace. Called only after the previous
    /// kernel's sections were all read (`read_section` returned `None`).
    fn read_head(&mut self, id: u32) -> Result<Option<KernelHead>, TraceError>;
    /// The kernel's next section, or `None` once the kernel's end is consumed.
    fn read_section(&mut self, head: &mut KernelHead) -> Result<Option<Section>, TraceError>;
    /// The current position, for errors found outside the parser.
    fn here(&self) -> Location;
}

struct Current {
    head: KernelHead,
    default: Vec<Arc<Program>>,
    next: u64,
    pending: Option<Section>,
    ended: bool,
}

/// Drives a [`Parser`] as a [`crate::source::TraceSource`]. After an error every later call
/// returns the same error.
pub(crate) struct Streamer<P> {
    parser: P,
    next_id: u32,
    cur: Option<Current>,
    failed: Option<TraceError>,
}

impl<P: Parser> Streamer<P> {
    pub(crate) fn new(parser: P) -> Self {
        Streamer { parser, next_id: 0, cur: None, failed: None }
    }

    pub(crate) fn parser(&self) -> &P {
        &self.parser
    }

    fn advance(&mut self) -> Result<Option<KernelHead>, TraceError> {
        if let Some(mut c) = self.cur.take() {
            // Skip what the consumer did not read of the previous kernel.
            if !c.ended {
                c.pending = None;
                while self.parser.read_section(&mut c.head)?.is_some() {}
            }
        }
        let head = self.parser.read_head(self.next_id)?;
        if head.is_some() {
            self.next_id = self.next_id.checked_add(1).ok_or_else(|| {
                TraceError::new(TraceErrorKind::Unsupported, self.parser.here(), "more than 2^32 kernels")
            })?;
        }
        Ok(head)
    }

    pub(crate) fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let head = match self.advance() {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.failed = Some(e.clone());
                return Err(e);
            }
        };
        let default = head.default.iter().map(|&p| head.programs[p as usize].clone()).collect();
        let Streamer { parser, cur, failed, .. } = self;
        let cur = cur.insert(Current { head, default, next: 0, pending: None, ended: false });
        Ok(Some(Box::new(StreamKernel { parser, cur, failed })))
    }
}

struct StreamKernel<'a, P> {
    parser: &'a mut P,
    cur: &'a mut Current,
    failed: &'a mut Option<TraceError>,
}

impl<P: Parser> StreamKernel<'_, P> {
    fn step(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        let c = &mut *self.cur;
        let num_ctas = c.head.info.num_ctas();
        if c.next >= num_ctas {
            if !c.ended {
                // Consume the kernel's end; a section past the grid is an error the parser reports.
                while self.parser.read_section(&mut c.head)?.is_some() {}
                c.ended = true;
            }
            return Ok(None);
        }
        let linear = c.next;
        if c.pending.is_none() && !c.ended {
            match self.parser.read_section(&mut c.head)? {
                Some(s) => c.pending = Some(s),
                None => c.ended = true,
            }
        }
        let coord = c.head.info.grid.unlinear(linear);
        let warps = match c.pending.take_if(|s| s.linear == linear) {
            Some(s) => {
                let k = c.head.programs.len();
                s.warps
                    .iter()
                    .map(|&v| match (v as usize).checked_sub(k) {
                        None => c.head.programs[v as usize].clone(),
                        Some(i) => s.locals[i].clone(),
                    })
                    .collect()
            }
            None if c.default.is_empty() => return Err(no_layout(&c.head.info, linear, self.parser.here())),
            None => c.default.clone(),
        };
        c.next += 1;
        Ok(Some(CtaTrace { coord, warps }))
    }
}

impl<P: Parser> KernelSource for StreamKernel<'_, P> {
    fn info(&self) -> &KernelInfo {
        &self.cur.head.info
    }

    fn ops(&self) -> &OpTable {
        &self.cur.head.ops
    }

    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        if let Some(e) = &*self.failed {
            return Err(e.clone());
        }
        self.step().inspect_err(|e| *self.failed = Some(e.clone()))
    }

    fn skip_run(&mut self, max: u64) -> Result<Option<CtaRun>, TraceError> {
        if let Some(e) = &*self.failed {
            return Err(e.clone());
        }
        self.run(max).inspect_err(|e| *self.failed = Some(e.clone()))
    }
}

impl<P: Parser> StreamKernel<'_, P> {
    /// The CTAs up to the next section (which the parser reads ahead by one, as `step` does).
    fn run(&mut self, max: u64) -> Result<Option<CtaRun>, TraceError> {
        let c = &mut *self.cur;
        let num_ctas = c.head.info.num_ctas();
        if c.next >= num_ctas || c.default.is_empty() || max == 0 {
            return Ok(None);
        }
        if c.pending.is_none() && !c.ended {
            match self.parser.read_section(&mut c.head)? {
                Some(s) => c.pending = Some(s),
                None => c.ended = true,
            }
        }
        let end = c.pending.as_ref().map_or(num_ctas, |s| s.linear).min(c.next.saturating_add(max));
        if end <= c.next {
            return Ok(None);
        }
        let run = CtaRun { first: c.next, count: end - c.next, warps: c.default.clone() };
        c.next = end;
        Ok(Some(run))
    }
}

fn no_layout(info: &KernelInfo, linear: u64, at: Location) -> TraceError {
    TraceError::new(
        TraceErrorKind::Invalid,
        at,
        format!(
            "kernel `{}`: CTA {} has no `cta` section and the kernel has no default layout",
            info.name,
            info.grid.unlinear(linear)
        ),
    )
}

/// Reads a whole trace into memory; section programs are appended to the kernel's programs.
pub(crate) fn collect<P: Parser>(mut parser: P) -> Result<Trace, TraceError> {
    let mut kernels = Vec::new();
    let mut id = 0u32;
    while let Some(mut head) = parser.read_head(id)? {
        let mut programs = head.programs.clone();
        let k = programs.len();
        let mut overrides = BTreeMap::new();
        let num_ctas = head.info.num_ctas();
        // Without a default layout every CTA needs a section: report the first one without,
        // where the streaming reader would.
        let mut expected = 0u64;
        while let Some(sec) = parser.read_section(&mut head)? {
            if head.default.is_empty() && sec.linear != expected {
                return Err(no_layout(&head.info, expected, parser.here()));
            }
            expected = sec.linear + 1;
            let base = programs.len();
            let warps = sec
                .warps
                .iter()
                .map(|&v| match (v as usize).checked_sub(k) {
                    None => v,
                    Some(i) => (base + i) as u32,
                })
                .collect();
            programs.extend(sec.locals);
            overrides.insert(sec.linear, warps);
        }
        if head.default.is_empty() && expected < num_ctas {
            return Err(no_layout(&head.info, expected, parser.here()));
        }
        let kt = KernelTrace {
            info: head.info,
            ops: head.ops,
            programs,
            layout: CtaLayout { default: head.default, overrides },
        };
        kt.check().map_err(|e| TraceError::new(TraceErrorKind::Invalid, head.at.clone(), e))?;
        kernels.push(kt);
        id = id
            .checked_add(1)
            .ok_or_else(|| TraceError::new(TraceErrorKind::Unsupported, parser.here(), "more than 2^32 kernels"))?;
    }
    Ok(Trace { kernels })
}
