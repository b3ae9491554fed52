//! A stable 64-bit content hash (FNV-1a) for provenance: the same bytes give the same hash on
//! every platform, build and run. Not cryptographic: it identifies a config or a trace in a
//! report, it does not protect anything.

use std::io;

use gpusim_isa::Trace;
use gpusim_isa::text::TextWriter;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over everything written to it.
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(OFFSET)
    }
}

impl Fnv64 {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    pub fn value(&self) -> u64 {
        self.0
    }

    /// The hash as 16 lowercase hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

impl io::Write for Fnv64 {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Hex hash of a string.
pub fn hash_str(s: &str) -> String {
    let mut h = Fnv64::default();
    h.update(s.as_bytes());
    h.hex()
}

/// Hex hash of a trace's text form (docs/trace-format.md): two traces that write the same text
/// hash the same. Streams into the hasher, so nothing of the trace's size is allocated.
pub fn hash_trace(trace: &Trace) -> Result<String, String> {
    // Version 2 only where a kernel has per-CTA parameters (attention's trip counts), so the
    // hashes of every other trace stay those of version 1.
    let v2 = trace.kernels.iter().any(|k| k.programs.iter().any(|p| !p.params.is_empty() || !p.tables.is_empty()));
    let mut w = if v2 { TextWriter::with_version(Fnv64::default(), 2) } else { TextWriter::new(Fnv64::default()) }
        .map_err(|e| e.to_string())?;
    for k in &trace.kernels {
        w.write_kernel(k).map_err(|e| format!("kernel `{}`: {e}", k.info.name))?;
    }
    Ok(w.finish().map_err(|e| e.to_string())?.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fnv1a_values() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(hash_str(""), "cbf29ce484222325");
        assert_eq!(hash_str("a"), "af63dc4c8601ec8c");
        assert_eq!(hash_str("foobar"), "85944171f73967e8");
    }

    #[test]
    fn trace_hash_is_stable_and_content_sensitive() {
        let empty = Trace { kernels: vec![] };
        assert_eq!(hash_trace(&empty).unwrap(), hash_str("gpusim-trace 1\n"));
    }
}
