//! Compressed traces (zstd, xz) read through the one opener give exactly what the plain files
//! give: the same kernels, op tables and programs, CTA by CTA. Detection is by magic bytes, so
//! the names do not matter.

use std::path::{Path, PathBuf};

use gpusim_isa::{Dim3, KernelInfo, OpTable, Program, TraceSource};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpusim-compressed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

fn xz(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = liblzma::read::XzEncoder::new(bytes, 6);
    std::io::Read::read_to_end(&mut e, &mut out).unwrap();
    out
}

type Kernel = (KernelInfo, OpTable, Vec<(Dim3, Vec<Program>)>);

/// Everything a trace hands out, CTA by CTA.
fn read(path: &Path) -> Vec<Kernel> {
    let (_, mut src) = gpusim_isa::open::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_source(&mut *src)
}

fn read_source(src: &mut dyn TraceSource) -> Vec<Kernel> {
    let mut out = Vec::new();
    while let Some(mut k) = src.next_kernel().unwrap() {
        let mut ctas = Vec::new();
        while let Some(c) = k.next_cta().unwrap() {
            ctas.push((c.coord, c.warps.iter().map(|p| (**p).clone()).collect()));
        }
        out.push((k.info().clone(), k.ops().clone(), ctas));
    }
    out
}

#[test]
fn compressed_accelsim_members_and_list_read_the_same() {
    let src = examples().join("accelsim");
    let plain = read(&src);
    assert_eq!(plain.len(), 2, "the shipped example has two kernels");
    for (codec, f) in [("zst", zstd as fn(&[u8]) -> Vec<u8>), ("xz", xz)] {
        let d = tmp(codec);
        let list = std::fs::read_to_string(src.join("kernelslist.g")).unwrap();
        let mut new_list = String::new();
        for line in list.lines() {
            if line.starts_with("kernel") {
                let bytes = std::fs::read(src.join(line)).unwrap();
                let name = format!("{line}.{codec}");
                let packed = f(&bytes);
                assert_ne!(packed, bytes);
                std::fs::write(d.join(&name), packed).unwrap();
                new_list.push_str(&name);
            } else {
                new_list.push_str(line);
            }
            new_list.push('\n');
        }
        std::fs::write(d.join("kernelslist.g"), &new_list).unwrap();
        assert!(read(&d) == plain, "{codec}: compressed members read differently");
        // The list itself compressed, under a name that says nothing.
        std::fs::write(d.join("list.bin"), f(new_list.as_bytes())).unwrap();
        assert!(read(&d.join("list.bin")) == plain, "{codec}: a compressed kernelslist.g reads differently");
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn compressed_text_and_binary_traces_read_the_same() {
    let text = examples().join("two_streams.trace");
    let plain = read(&text);
    let d = tmp("streams");
    let trace = gpusim_isa::text::read_trace("t", &std::fs::read_to_string(&text).unwrap()).unwrap();
    let mut bin = Vec::new();
    gpusim_isa::binary::write_trace(&trace, &mut bin).unwrap();
    std::fs::write(d.join("t.gtb"), &bin).unwrap();
    let plain_bin = read(&d.join("t.gtb"));
    let text_bytes = std::fs::read(&text).unwrap();
    for (name, bytes, want) in [
        ("a.trace.zst", zstd(&text_bytes), &plain),
        ("b.trace.xz", xz(&text_bytes), &plain),
        ("c", zstd(&bin), &plain_bin),
        ("d", xz(&bin), &plain_bin),
    ] {
        std::fs::write(d.join(name), bytes).unwrap();
        assert!(read(&d.join(name)) == *want, "{name} reads differently");
    }
    // A corrupt compressed stream is an error, not a panic.
    let mut bad = zstd(&text_bytes);
    let n = bad.len();
    bad.truncate(n / 2);
    std::fs::write(d.join("bad.zst"), bad).unwrap();
    let r = gpusim_isa::open::open(&d.join("bad.zst")).and_then(|(_, mut s)| {
        while let Some(mut k) = s.next_kernel()? {
            while k.next_cta()?.is_some() {}
        }
        Ok(())
    });
    assert!(r.is_err(), "a truncated zstd stream must fail");
    let _ = std::fs::remove_dir_all(&d);
}
