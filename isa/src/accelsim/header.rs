//! The `-key = value` header of a `.traceg` file.

use std::io::BufRead;

use super::lines::{DiagSink, LineReader, key_value, parse_dec_u64, parse_hex_u64, parse_triple};
use crate::diag;
use crate::error::{TraceError, TraceErrorKind};
use crate::kernel::Dim3;

/// Tracer versions this importer reads.
pub const SUPPORTED_TRACER_VERSIONS: std::ops::RangeInclusive<u32> = 3..=5;

/// What the header of a `.traceg` file says, as written (see the module docs for how it maps to
/// [`crate::kernel::KernelInfo`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TracegHeader {
    /// `-kernel name` (usually the mangled name); the file name when the header has none.
    pub kernel_name: String,
    /// `-kernel id`: the tracer's 1-based launch counter (informational).
    pub kernel_id: Option<u64>,
    pub grid: Dim3,
    pub block: Dim3,
    /// `-cluster dim` of newer tracers (Hopper thread-block clusters); `None` when absent.
    pub cluster: Option<Dim3>,
    /// `-shmem`: static plus dynamic shared memory per CTA, bytes.
    pub shmem: u32,
    /// `-nregs`: registers per thread; `None` when absent.
    pub nregs: Option<u32>,
    /// `-binary version`: compute capability of the SASS (80, 86, 90, ...); 0 when absent.
    pub binary_version: u32,
    /// `-cuda stream id`: the raw `CUstream` handle value (0 is the legacy default stream).
    pub cuda_stream_id: u64,
    pub shmem_base_addr: u64,
    pub local_mem_base_addr: u64,
    pub nvbit_version: String,
    /// `-accelsim tracer version` (3 to 5).
    pub tracer_version: u32,
    /// `-enable lineinfo = 1`: every instruction line starts with a source line number.
    pub lineinfo: bool,
}

/// Reads header lines up to (not including) the first line that starts with `#`.
pub(super) fn parse_header<R: BufRead>(
    lines: &mut LineReader<R>,
    diags: &mut DiagSink,
) -> Result<TracegHeader, TraceError> {
    let fallback_name = std::path::Path::new(lines.file())
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| lines.file().to_string());
    let mut h = TracegHeader {
        kernel_name: fallback_name,
        kernel_id: None,
        grid: Dim3::ZERO,
        block: Dim3::ZERO,
        cluster: None,
        shmem: 0,
        nregs: None,
        binary_version: 0,
        cuda_stream_id: 0,
        shmem_base_addr: 0,
        local_mem_base_addr: 0,
        nvbit_version: String::new(),
        tracer_version: 0,
        lineinfo: false,
    };
    let (mut have_grid, mut have_block, mut have_version) = (false, false, false);
    let end = loop {
        if !lines.advance()? {
            break lines.eof_location();
        }
        let at = lines.at();
        let text = at.text.trim_start();
        let lead = at.text.len() - text.len();
        if text.is_empty() {
            continue;
        }
        if text.starts_with('#') {
            // The tracer ends the header with a `#traces format = ...` comment, consumed here;
            // a body that starts right away is left for the body reader.
            let loc = at.loc(lead);
            if text.split_whitespace().next() == Some("#BEGIN_TB") {
                lines.unread();
            }
            break loc;
        }
        let Some(body) = text.strip_prefix('-') else {
            diags.push(diag::IGNORED_LINE, at.loc(lead), format!("header line ignored: `{}`", text.trim_end()));
            continue;
        };
        let Some((key, value, voff)) = key_value(body) else {
            diags.push(
                diag::IGNORED_LINE,
                at.loc(lead),
                format!("header line without `=` ignored: `{}`", text.trim_end()),
            );
            continue;
        };
        let voff = voff + lead + 1;
        let num = |what: &str| -> Result<u64, TraceError> {
            parse_dec_u64(value).ok_or_else(|| at.syntax(voff, format!("-{what}: bad number `{value}`")))
        };
        let num32 = |what: &str| -> Result<u32, TraceError> {
            let v = num(what)?;
            u32::try_from(v).map_err(|_| at.syntax(voff, format!("-{what}: {v} is too large")))
        };
        let hex = |what: &str| -> Result<u64, TraceError> {
            parse_hex_u64(value).ok_or_else(|| at.syntax(voff, format!("-{what}: bad hexadecimal address `{value}`")))
        };
        match key.as_str() {
            "kernel name" => h.kernel_name = value.to_string(),
            "kernel id" => h.kernel_id = Some(num("kernel id")?),
            "grid dim" => {
                let [x, y, z] = parse_triple(&at, value, voff, "-grid dim")?;
                let ok = x > 0
                    && y > 0
                    && z > 0
                    && (x as u64).checked_mul(y as u64).and_then(|v| v.checked_mul(z as u64)).is_some();
                if !ok {
                    return Err(at.err(
                        TraceErrorKind::Invalid,
                        voff,
                        format!("-grid dim: invalid grid ({x},{y},{z})"),
                    ));
                }
                h.grid = Dim3::new(x, y, z);
                have_grid = true;
            }
            "block dim" => {
                let [x, y, z] = parse_triple(&at, value, voff, "-block dim")?;
                let threads = (x as u64).saturating_mul(y as u64).saturating_mul(z as u64);
                if threads == 0 || threads > 1024 {
                    return Err(at.err(
                        TraceErrorKind::Invalid,
                        voff,
                        format!("-block dim: ({x},{y},{z}) is {threads} threads; a CTA has 1 to 1024"),
                    ));
                }
                h.block = Dim3::new(x, y, z);
                have_block = true;
            }
            "cluster dim" => {
                let [x, y, z] = parse_triple(&at, value, voff, "-cluster dim")?;
                if x == 0 || y == 0 || z == 0 {
                    return Err(at.err(
                        TraceErrorKind::Invalid,
                        voff,
                        format!("-cluster dim: invalid cluster ({x},{y},{z})"),
                    ));
                }
                h.cluster = Some(Dim3::new(x, y, z));
            }
            "shmem" => h.shmem = num32("shmem")?,
            "nregs" => h.nregs = Some(num32("nregs")?),
            "binary version" => h.binary_version = num32("binary version")?,
            "cuda stream id" => {
                h.cuda_stream_id = parse_dec_u64(value)
                    .or_else(|| value.starts_with("0x").then(|| parse_hex_u64(value)).flatten())
                    .ok_or_else(|| at.syntax(voff, format!("-cuda stream id: bad number `{value}`")))?;
            }
            "shmem base_addr" => h.shmem_base_addr = hex("shmem base_addr")?,
            "local mem base_addr" => h.local_mem_base_addr = hex("local mem base_addr")?,
            "nvbit version" => h.nvbit_version = value.to_string(),
            "accelsim tracer version" => {
                let v = num("accelsim tracer version")?;
                if !u32::try_from(v).is_ok_and(|v| SUPPORTED_TRACER_VERSIONS.contains(&v)) {
                    return Err(at.err(
                        TraceErrorKind::Unsupported,
                        voff,
                        format!("Accel-Sim tracer version {v} is not supported (versions 3 to 5 are)"),
                    ));
                }
                h.tracer_version = v as u32; // within 3..=5
                have_version = true;
            }
            "enable lineinfo" => {
                h.lineinfo = match value {
                    "0" => false,
                    "1" => true,
                    _ => return Err(at.syntax(voff, format!("-enable lineinfo: expected 0 or 1, found `{value}`"))),
                }
            }
            _ => diags.push(diag::IGNORED_LINE, at.loc(lead), format!("unknown header key `-{key}` ignored")),
        }
    };
    let missing = |what: &str, kind: TraceErrorKind| {
        TraceError::new(kind, end.clone(), format!("the header has no `-{what}` line"))
    };
    if !have_version {
        return Err(TraceError::new(
            TraceErrorKind::Unsupported,
            end,
            "the header has no `-accelsim tracer version` line (tracer versions before 3 are not supported)",
        ));
    }
    if !have_grid {
        return Err(missing("grid dim", TraceErrorKind::Invalid));
    }
    if !have_block {
        return Err(missing("block dim", TraceErrorKind::Invalid));
    }
    Ok(h)
}
