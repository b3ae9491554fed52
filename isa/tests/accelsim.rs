//! Accel-Sim trace import: formats, versions, streaming through `kernelslist.g`, errors.

use std::path::{Path, PathBuf};

use gpusim_isa::accelsim::{AccelSimTrace, TracegReader, parse_traceg_str, parse_traceg_str_with_diagnostics};
use gpusim_isa::diag;
use gpusim_isa::{
    Cursor, Dim3, KernelSource, KernelTrace, Lanes, Program, Reg, RegRange, Step, TraceErrorKind, TraceSource,
};

/// A `.traceg` header; `lineinfo: None` leaves the `-enable lineinfo` line out (as version 3 did).
fn header(version: u32, lineinfo: Option<bool>, grid: (u32, u32, u32), block: (u32, u32, u32)) -> String {
    let mut h = format!(
        "-kernel name = _Z4testPf\n-kernel id = 1\n-grid dim = ({},{},{})\n-block dim = ({},{},{})\n\
         -shmem = 0\n-nregs = 16\n-binary version = 80\n-cuda stream id = 0\n\
         -shmem base_addr = 0x00007f0000000000\n-local mem base_addr = 0x00007e0000000000\n\
         -nvbit version = 1.5.5\n-accelsim tracer version = {version}\n",
        grid.0, grid.1, grid.2, block.0, block.1, block.2
    );
    if let Some(l) = lineinfo {
        h += &format!("-enable lineinfo = {}\n", l as u8);
    }
    h + "\n#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width \
         [adrrescompress?] [mem_addresses] immediate\n\n"
}

/// One thread block with the given warps' instruction lines.
fn tb(coord: (u32, u32, u32), warps: &[&[&str]]) -> String {
    let mut s = format!("\n#BEGIN_TB\n\nthread block = {},{},{}\n", coord.0, coord.1, coord.2);
    for (w, lines) in warps.iter().enumerate() {
        s += &format!("\nwarp = {w}\ninsts = {}\n", lines.len());
        for l in *lines {
            s += l;
            s += "\n";
        }
    }
    s + "\n#END_TB\n"
}

/// Every instruction of warp `w` of CTA `cta` with its per-lane addresses (inactive lanes 0).
fn walk(k: &KernelTrace, cta: u64, w: usize) -> Vec<(String, u32, Option<[u64; 32]>)> {
    let c = k.cta(cta);
    let p: &Program = &c.warps[w];
    let mut cur = Cursor::new(p, c.coord.as_array(), w as u32);
    let mut out = Vec::new();
    while let Some(i) = cur.peek(p) {
        let i = *i;
        let mut a = [0u64; 32];
        let mem = cur.lane_addresses(p, &i, &mut a).then_some(a);
        out.push((k.ops.get(i.op).mnemonic.clone(), i.mask, mem));
        cur.advance();
    }
    out
}

fn insts(p: &Program) -> Vec<gpusim_isa::Inst> {
    p.steps.iter().filter_map(|s| if let Step::Inst(i) = s { Some(*i) } else { None }).collect()
}

fn expect_lanes(addrs: &[u64; 32], mask: u32, f: impl Fn(u64) -> u64) {
    for l in 0..32u64 {
        let want = if mask & (1 << l) != 0 { f(l) } else { 0 };
        assert_eq!(addrs[l as usize], want, "lane {l}");
    }
}

#[test]
fn header_fields_map_to_kernel_info() {
    let text = "-kernel name = _Z6kernelPfS_i\n-kernel id = 7\n-grid dim = (2,3,1)\n-block dim = (64,2,1)\n\
                -shmem = 4096\n-nregs = 40\n-binary version = 86\n-cuda stream id = 94823782139040\n\
                -shmem base_addr = 0x00007f3a7a000000\n-local mem base_addr = 0x00007f3a78000000\n\
                -nvbit version = 1.5.5\n-accelsim tracer version = 5\n-enable lineinfo = 0\n\
                -some future key = 3\n\n#traces format = ...\n";
    let mut body = String::new();
    for i in 0..6u32 {
        let w: &[&str] = &["0000 ffffffff 0 EXIT 0 0 0"];
        body += &tb((i % 2, i / 2, 0), &[w, w, w, w]);
    }
    let full = format!("{text}{body}");
    let r = TracegReader::new(full.as_bytes(), "k.traceg", 3).unwrap();
    let h = r.header();
    assert_eq!(h.kernel_id, Some(7));
    assert_eq!(h.cuda_stream_id, 94823782139040);
    assert_eq!(h.shmem_base_addr, 0x7f3a7a000000);
    assert_eq!(h.local_mem_base_addr, 0x7f3a78000000);
    assert_eq!(h.nvbit_version, "1.5.5");
    assert_eq!((h.tracer_version, h.lineinfo), (5, false));
    let info = r.info();
    assert_eq!(info.id, 3);
    assert_eq!(info.name, "_Z6kernelPfS_i");
    assert_eq!(info.grid, Dim3::new(2, 3, 1));
    assert_eq!(info.block, Dim3::new(64, 2, 1));
    assert_eq!(info.cluster, Dim3::ONE);
    assert_eq!(info.warps_per_cta(), 4);
    assert_eq!((info.regs_per_thread, info.smem_bytes, info.sm_version), (40, 4096, 86));
    assert_eq!(info.stream, 1, "a non-null stream of a lone kernel");
    assert!(info.deps.is_empty());
    assert_eq!(r.diagnostics().len(), 1);
    assert_eq!(r.diagnostics()[0].code, diag::IGNORED_LINE);
    assert_eq!(r.diagnostics()[0].at.line, 14);

    let (k, diags) = parse_traceg_str_with_diagnostics("k.traceg", &full).unwrap();
    k.check().unwrap();
    assert_eq!(k.info.id, 0);
    assert_eq!(k.programs.len(), 24);
    assert_eq!(k.cta(5).coord, Dim3::new(1, 2, 0));
    assert_eq!(diags.len(), 1);
}

#[test]
fn address_mode_0_lists_active_lanes() {
    // Partial mask, irregular addresses → offsets; partial mask, regular addresses → stride.
    let mask = 0x8000_0f01u32;
    let irregular = [0x7f00_0000_1000u64, 0x7f00_0000_2000, 0x7f00_0000_0ff0, 0x7f00_0000_2004, 0x7f00_0000_2008, 0x10];
    let regular: Vec<u64> = [0u64, 8, 9, 10, 11, 31].iter().map(|l| 0x5000 + 4 * l).collect();
    let list = |a: &[u64]| a.iter().map(|x| format!("0x{x:016x}")).collect::<Vec<_>>().join(" ");
    let l1 = format!("0010 {mask:08x} 1 R4 LDG.E 1 R2 4 0 {} 0", list(&irregular));
    let l2 = format!("0020 {mask:08x} 0 STG.E 2 R2 R4 4 0 {} 0", list(&regular));
    let text = header(5, Some(false), (1, 1, 1), (32, 1, 1)) + &tb((0, 0, 0), &[&[&l1, &l2]]);
    let k = parse_traceg_str("m0", &text).unwrap();
    let w = walk(&k, 0, 0);
    let lanes = [0u64, 8, 9, 10, 11, 31];
    let a = w[0].2.unwrap();
    for (i, l) in lanes.iter().enumerate() {
        assert_eq!(a[*l as usize], irregular[i]);
    }
    expect_lanes(&a, mask, |l| irregular[lanes.iter().position(|&x| x == l).unwrap()]);
    expect_lanes(&w[1].2.unwrap(), mask, |l| 0x5000 + 4 * l);
    let i = insts(&k.programs[0]);
    assert!(matches!(i[0].mem.unwrap().lanes, Lanes::Offsets { .. }));
    assert_eq!(i[1].mem.unwrap().lanes, Lanes::Stride(4), "a progression in lane index is stored as a stride");
}

#[test]
fn address_mode_1_is_base_and_stride() {
    let lines = [
        "0000 ffffffff 1 R4 LDG.E.128.SYS 1 R2 16 1 0x7f0000000000 16 0",
        "0010 00ffff00 1 R5 LDG.E 1 R2 4 1 0x7f0000001020 4 0",
        "0020 0000ff00 1 R6 LDG.E 1 R2 4 1 0x7f0000002000 -4 0",
        "0030 00000040 1 R7 LDG.E 1 R2 4 1 0x7f0000003000 4 0",
    ];
    let text = header(5, Some(false), (1, 1, 1), (32, 1, 1)) + &tb((0, 0, 0), &[&lines]);
    let k = parse_traceg_str("m1", &text).unwrap();
    let w = walk(&k, 0, 0);
    expect_lanes(&w[0].2.unwrap(), u32::MAX, |l| 0x7f00_0000_0000 + 16 * l);
    expect_lanes(&w[1].2.unwrap(), 0x00ff_ff00, |l| 0x7f00_0000_1020 + 4 * (l - 8));
    expect_lanes(&w[2].2.unwrap(), 0x0000_ff00, |l| 0x7f00_0000_2000 - 4 * (l - 8));
    expect_lanes(&w[3].2.unwrap(), 0x40, |_| 0x7f00_0000_3000);
    let i = insts(&k.programs[0]);
    assert_eq!(i[0].mem.unwrap().lanes, Lanes::Stride(16));
    assert_eq!(i[2].mem.unwrap().lanes, Lanes::Stride(-4));
    assert_eq!(i[0].dst[0], RegRange::new(Reg::r(4), 4), "a 16-byte load writes 4 registers");
}

#[test]
fn address_mode_2_is_base_and_deltas() {
    // Deltas run from one active lane to the next; irregular deltas, negative deltas.
    let l1 = "0000 0000f00f 1 R4 LDS 1 R0 4 2 0x7f0000000100 4 -200 1024 8 8 8 4 0";
    // Even lanes, constant delta: a progression in lane index (stride 4 per lane).
    let l2 = "0010 55555555 0 STS 2 R0 R4 4 2 0x7f0000000000 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 0";
    // One active lane: base only.
    let l3 = "0020 00000100 0 STG.E 2 R2 R9 4 2 0x7f3a5c001804 0";
    // Nobody active (a predicated-off store): the tracer writes base 0 and no deltas.
    let l4 = "0030 00000000 0 STG.E 2 R2 R9 4 2 0x0 0";
    let text = header(5, Some(false), (1, 1, 1), (32, 1, 1)) + &tb((0, 0, 0), &[&[l1, l2, l3, l4]]);
    let k = parse_traceg_str("m2", &text).unwrap();
    let w = walk(&k, 0, 0);
    let want = [(0u64, 0x100u64), (1, 0x104), (2, 0x104 - 200), (3, 0x104 - 200 + 1024)];
    let a = w[0].2.unwrap();
    for (l, off) in want {
        assert_eq!(a[l as usize], 0x7f00_0000_0000u64.wrapping_add(off), "lane {l}");
    }
    let mut addr = 0x7f00_0000_0000u64 + 0x104 - 200 + 1024;
    for (k_, l) in [12usize, 13, 14, 15].iter().enumerate() {
        addr += [8, 8, 8, 4][k_];
        assert_eq!(a[*l], addr, "lane {l}");
    }
    expect_lanes(&w[1].2.unwrap(), 0x5555_5555, |l| 0x7f00_0000_0000 + 4 * l);
    expect_lanes(&w[2].2.unwrap(), 0x100, |_| 0x7f3a_5c00_1804);
    assert!(w[3].2.is_some());
    let i = insts(&k.programs[0]);
    assert!(matches!(i[0].mem.unwrap().lanes, Lanes::Offsets { .. }));
    assert_eq!(i[1].mem.unwrap().lanes, Lanes::Stride(4));
    assert_eq!(i[1].src, [RegRange::one(Reg::r(0)), RegRange::one(Reg::r(4)), RegRange::NONE, RegRange::NONE]);
}

#[test]
fn tracer_versions_3_4_5() {
    // Version 3: no lineinfo header, no immediate.
    let v3 = header(3, None, (1, 1, 1), (32, 1, 1))
        + &tb(
            (0, 0, 0),
            &[&[
                "0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0",
                "0010 ffffffff 1 R2 LDG.E 1 R4 4 1 0x1000 4",
                "0020 ffffffff 0 EXIT 0 0",
            ]],
        );
    let k = parse_traceg_str("v3", &v3).unwrap();
    let i = insts(&k.programs[0]);
    assert_eq!(i.len(), 3);
    assert_eq!(i[0].dst[0], RegRange::one(Reg::r(1)));
    assert_eq!(i[0].src[0], RegRange::NONE, "R255 is RZ");
    assert_eq!(i[1].pc, 0x10);
    // Version 4 without and with line numbers.
    let v4 = header(4, Some(false), (1, 1, 1), (32, 1, 1))
        + &tb((0, 0, 0), &[&["0670 ffffffff 0 STG.E 2 R2 R21 4 1 0x7f0e5f718000 4"]]);
    let k = parse_traceg_str("v4", &v4).unwrap();
    assert_eq!(walk(&k, 0, 0)[0].2.unwrap()[31], 0x7f0e5f718000 + 124);
    let v4l = header(4, Some(true), (1, 1, 1), (32, 1, 1))
        + &tb((0, 0, 0), &[&["17 0670 ffffffff 0 STG.E 2 R2 R21 4 1 0x7f0e5f718000 4"]]);
    let k = parse_traceg_str("v4l", &v4l).unwrap();
    assert_eq!(insts(&k.programs[0])[0].pc, 0x670);
    // Without `-enable lineinfo = 1` a leading line number is a misparse.
    let e = parse_traceg_str("v4x", &v4l.replace("-enable lineinfo = 1", "-enable lineinfo = 0")).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Syntax);
    // Version 5: trailing immediate (DEPBAR.LE SB0, 0x1 → 1), with line info.
    let v5 = header(5, Some(true), (1, 1, 1), (32, 1, 1))
        + &tb(
            (0, 0, 0),
            &[&[
                "40 01a0 ffffffff 0 LDGDEPBAR 0 0 0",
                "41 01b0 ffffffff 0 DEPBAR.LE 0 0 1",
                "42 01c0 ffffffff 1 R4 LDG.E.64 1 R2 8 1 0x2000 8 0",
                "43 01d0 ffffffff 0 EXIT 0 0 0",
            ]],
        );
    let k = parse_traceg_str("v5", &v5).unwrap();
    let i = insts(&k.programs[0]);
    assert_eq!(k.ops.get(i[1].op).mnemonic, "DEPBAR.LE");
    assert_eq!((i[0].imm, i[1].imm, i[2].imm), (0, 1, 0));
    assert_eq!(i[2].dst[0], RegRange::new(Reg::r(4), 2));
    // As in Accel-Sim's parser, an immediate is read in any version; more than that is an error.
    let k = parse_traceg_str(
        "v3i",
        &v3.replace("0010 ffffffff 1 R2 LDG.E 1 R4 4 1 0x1000 4", "0010 ffffffff 1 R2 LDG.E 1 R4 4 1 0x1000 4 -3"),
    )
    .unwrap();
    assert_eq!(insts(&k.programs[0])[1].imm, -3);
    let e = parse_traceg_str("v5x", &v5.replace("DEPBAR.LE 0 0 1", "DEPBAR.LE 0 0 1 9")).unwrap_err();
    assert_eq!((e.kind, e.at.col), (TraceErrorKind::Syntax, 36));
}

#[test]
fn cluster_lines_and_dims_are_accepted() {
    let h = header(5, Some(false), (4, 1, 1), (32, 1, 1)).replace("-nregs", "-cluster dim = (2,1,1)\n-nregs");
    let mut body = String::new();
    for x in 0..4u32 {
        body += &format!(
            "\n#BEGIN_TB\nthread block = {x},0,0\ncluster id = {},0,0\ncluster cta = {},0,0\ncluster rank = {}\n\
             warp = 0\ninsts = 1\n0000 ffffffff 0 EXIT 0 0 0\n#END_TB\n",
            x / 2,
            x % 2,
            x % 2
        );
    }
    let k = parse_traceg_str("cl", &(h + &body)).unwrap();
    assert_eq!(k.info.cluster, Dim3::new(2, 1, 1));
    assert_eq!(k.layout.overrides.len(), 4);
}

#[test]
fn tensor_and_wide_operands() {
    let lines = [
        "0000 ffffffff 1 R24 HMMA.16816.F32 3 R4 R8 R24 0 0",
        "0010 ffffffff 1 R28 HMMA.16816.F16 3 R4 R8 R28 0 0",
        "0020 ffffffff 0 STG.E.128 2 R2 R24 16 1 0x4000 16 0",
        "0030 ffffffff 1 R12 LDSM.16.M88.4 1 R3 2 1 0x7f0000000000 16 0",
        "0040 ffffffff 1 R40 FROBNICATE.X 1 R4 0 0",
    ];
    let text = header(5, Some(false), (1, 1, 1), (32, 1, 1)) + &tb((0, 0, 0), &[&lines]);
    let k = parse_traceg_str("t", &text).unwrap();
    let i = insts(&k.programs[0]);
    assert_eq!(i[0].dst[0], RegRange::new(Reg::r(24), 4));
    assert_eq!(i[0].src[2], RegRange::one(Reg::r(24)));
    assert_eq!(i[1].dst[0], RegRange::new(Reg::r(28), 2));
    assert_eq!(i[2].src[0], RegRange::one(Reg::r(2)));
    assert_eq!(i[2].src[1], RegRange::new(Reg::r(24), 4));
    assert_eq!(i[3].dst[0], RegRange::new(Reg::r(12), 4));
    assert!(!k.ops.get(i[4].op).known, "unknown opcodes are kept");
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpusim-accelsim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn two_kernel_dir(name: &str) -> PathBuf {
    let d = scratch(name);
    let exit: &[&str] = &["0000 ffffffff 0 EXIT 0 0 0"];
    let k1 = header(5, Some(false), (2, 1, 1), (64, 1, 1))
        .replace("-cuda stream id = 0", "-cuda stream id = 93000000000000")
        + &tb((0, 0, 0), &[&["0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 0", "0010 ffffffff 0 EXIT 0 0 0"], exit])
        + &tb((1, 0, 0), &[&["0000 ffffffff 1 R2 LDG.E 1 R4 4 1 0x1000 4 0", "0010 ffffffff 0 EXIT 0 0 0"], exit]);
    let k2 = header(4, Some(false), (1, 1, 1), (32, 1, 1))
        .replace("-cuda stream id = 0", "-cuda stream id = 94000000000000")
        + &tb((0, 0, 0), &[exit]);
    let k3 = header(4, Some(false), (1, 1, 1), (32, 1, 1))
        .replace("-cuda stream id = 0", "-cuda stream id = 93000000000000")
        + &tb((0, 0, 0), &[exit]);
    std::fs::write(d.join("kernel-1.traceg"), k1).unwrap();
    std::fs::write(d.join("kernel-2.traceg"), k2).unwrap();
    std::fs::write(d.join("kernel-3.traceg"), k3).unwrap();
    std::fs::write(
        d.join("kernelslist.g"),
        "MemcpyHtoD,0x00007f3a5c000000,2000\nkernel-1.traceg\n\nMemcpyDtoH,0x00007f3a5c000000,2000\n\
         MemcpyHtoD,0x00007f3a5c000800,64\nkernel-2.traceg\nkernel-3.traceg\n",
    )
    .unwrap();
    d
}

#[test]
fn streams_kernels_from_kernelslist() {
    let d = two_kernel_dir("stream");
    let mut t = AccelSimTrace::open(&d.join("kernelslist.g")).unwrap();
    assert_eq!(t.num_kernels(), 3);
    assert_eq!(t.kernel_paths().next().unwrap(), d.join("kernel-1.traceg"));
    assert_eq!(t.memcpys().len(), 2);
    assert_eq!((t.memcpys()[0].addr, t.memcpys()[0].bytes, t.memcpys()[0].before_kernel), (0x7f3a5c000000, 2000, 0));
    assert_eq!((t.memcpys()[1].bytes, t.memcpys()[1].before_kernel), (64, 1));
    assert_eq!(t.diagnostics().len(), 1, "the MemcpyDtoH line is skipped with a warning");
    assert_eq!(t.diagnostics()[0].at.line, 4);

    let mut seen = Vec::new();
    {
        let mut k = t.next_kernel().unwrap().unwrap();
        assert_eq!((k.info().id, k.info().stream, k.info().num_ctas()), (0, 1, 2));
        // The op table grows as CTAs arrive; ids never change.
        let c0 = k.next_cta().unwrap().unwrap();
        assert_eq!(c0.coord, Dim3::new(0, 0, 0));
        assert_eq!(c0.warps.len(), 2);
        assert_eq!(k.ops().len(), 2);
        let exit = k.ops().iter().find(|(_, d)| d.mnemonic == "EXIT").unwrap().0;
        let c1 = k.next_cta().unwrap().unwrap();
        assert_eq!(c1.coord, Dim3::new(1, 0, 0));
        assert_eq!(k.ops().len(), 3);
        assert_eq!(k.ops().iter().find(|(_, d)| d.mnemonic == "EXIT").unwrap().0, exit);
        assert!(k.next_cta().unwrap().is_none());
        assert!(k.next_cta().unwrap().is_none());
        seen.push(k.info().clone());
    }
    while let Some(mut k) = t.next_kernel().unwrap() {
        while k.next_cta().unwrap().is_some() {}
        seen.push(k.info().clone());
    }
    assert_eq!(seen.iter().map(|i| (i.id, i.stream)).collect::<Vec<_>>(), vec![(0, 1), (1, 2), (2, 1)]);
    assert!(seen.iter().all(|i| i.deps.is_empty()));

    // Paths are relative to the list, not to the working directory.
    let mut t = AccelSimTrace::open(&d.join("kernelslist.g")).unwrap();
    let all = t.read_all().unwrap();
    assert_eq!(all.kernels.len(), 3);
    for k in &all.kernels {
        k.check().unwrap();
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn missing_kernel_file_names_the_path() {
    let d = two_kernel_dir("missing");
    std::fs::remove_file(d.join("kernel-2.traceg")).unwrap();
    let mut t = AccelSimTrace::open(&d.join("kernelslist.g")).unwrap();
    assert!(t.next_kernel().unwrap().is_some());
    let e = t.next_kernel().err().unwrap();
    assert_eq!(e.kind, TraceErrorKind::Io);
    assert!(e.message.contains(&d.join("kernel-2.traceg").display().to_string()), "{e}");
    assert_eq!((e.at.line, e.at.col), (6, 1));
    assert!(e.at.file.ends_with("kernelslist.g"));
    // The next call moves on to kernel 3.
    assert_eq!(t.next_kernel().unwrap().unwrap().info().id, 2);

    let e = AccelSimTrace::open(&d.join("nope.g")).err().unwrap();
    assert_eq!(e.kind, TraceErrorKind::Io);
    assert!(e.message.contains("nope.g"));

    // A compressed member is read (tests/compressed.rs); a missing one is an I/O error naming it.
    std::fs::write(d.join("kernelslist.g"), "kernel-1.traceg.xz\n").unwrap();
    let mut t = AccelSimTrace::open(&d.join("kernelslist.g")).unwrap();
    let e = t.next_kernel().err().unwrap();
    assert_eq!(e.kind, TraceErrorKind::Io);
    assert!(e.message.contains("kernel-1.traceg.xz"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A one-kernel trace with 2 CTAs of 2 warps; the error tests edit it.
fn two_ctas() -> String {
    let w: &[&str] = &["0000 ffffffff 1 R2 LDG.E 1 R4 4 1 0x1000 4 0", "0010 ffffffff 0 EXIT 0 0 0"];
    header(5, Some(false), (2, 1, 1), (64, 1, 1)) + &tb((0, 0, 0), &[w, w]) + &tb((1, 0, 0), &[w, w])
}

/// `text` with the `nth` (0-based) occurrence of `pat` replaced.
fn replace_nth(text: &str, pat: &str, with: &str, nth: usize) -> String {
    let (at, _) = text.match_indices(pat).nth(nth).unwrap();
    format!("{}{with}{}", &text[..at], &text[at + pat.len()..])
}

fn line_of(text: &str, needle: &str, nth: usize) -> u64 {
    text.lines().enumerate().filter(|(_, l)| l.contains(needle)).nth(nth).unwrap().0 as u64 + 1
}

#[test]
fn error_truncated_block() {
    let full = two_ctas();
    let cut = &full[..full.rfind("0010 ffffffff 0 EXIT").unwrap()];
    let e = parse_traceg_str("cut", cut).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Truncated);
    assert_eq!(e.at.line, cut.lines().count() as u64 + 1);
    assert!(e.message.contains("inside the thread block"), "{e}");
    // A trace that stops between blocks lacks blocks of the grid.
    let cut = &full[..full.rfind("#BEGIN_TB").unwrap()];
    let e = parse_traceg_str("short", cut).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Truncated);
    assert!(e.message.contains("1 of the 2 thread blocks"), "{e}");
}

#[test]
fn error_bad_hex() {
    let bad = two_ctas().replacen("0x1000", "0x10g0", 3);
    let e = parse_traceg_str("hex", &bad).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Syntax);
    assert_eq!(e.at.line, line_of(&bad, "0x10g0", 0));
    assert_eq!(e.at.col, 35);
    assert_eq!(e.at.file, "hex");
    let bad = two_ctas().replacen("0010 ffffffff 0 EXIT", "0010 fffzffff 0 EXIT", 1);
    let e = parse_traceg_str("mask", &bad).unwrap_err();
    assert_eq!((e.kind, e.at.line, e.at.col), (TraceErrorKind::Syntax, line_of(&bad, "fffz", 0), 6));
}

#[test]
fn error_wrong_instruction_count() {
    // Fewer lines than `insts` said: reported where the next warp starts.
    let bad = two_ctas().replacen("insts = 2", "insts = 3", 2);
    let e = parse_traceg_str("few", &bad).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Truncated);
    assert_eq!(e.at.line, line_of(&bad, "warp = 1", 0));
    assert!(e.message.contains("2 of the 3"), "{e}");
    // The last warp of a block: reported at `#END_TB`.
    let bad = replace_nth(&two_ctas(), "insts = 2", "insts = 3", 1);
    let e = parse_traceg_str("few", &bad).unwrap_err();
    assert_eq!((e.kind, e.at.line), (TraceErrorKind::Truncated, line_of(&bad, "#END_TB", 0)));
    // More lines than `insts` said: reported at the extra line.
    let bad = two_ctas().replacen("insts = 2", "insts = 1", 1);
    let e = parse_traceg_str("many", &bad).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Invalid);
    assert_eq!(e.at.line, line_of(&bad, "EXIT", 0));
}

/// Lines seen before are decoded from the reader's memo of lines: the same instructions as the
/// first time, and the same errors where a repeated line is out of place (past `insts`, before
/// `warp`), since the memo is asked only where an instruction line may come.
#[test]
fn repeated_lines_decode_as_the_first_and_keep_their_errors() {
    let ffma = "0080 ffffffff 1 R8 FFMA 3 R5 R6 R8 0 0";
    let ldg = |a: u32| format!("0090 ffffffff 1 R2 LDG.E 1 R4 4 1 0x{a:x} 4 0");
    let (l0, l1) = (ldg(0x1000), ldg(0x2000));
    let w: &[&str] = &[ffma, &l0, ffma, &l1, ffma, "00a0 ffffffff 0 EXIT 0 0 0"];
    let text = header(5, Some(false), (2, 1, 1), (32, 1, 1)) + &tb((0, 0, 0), &[w]) + &tb((1, 0, 0), &[w]);
    let k = parse_traceg_str("rep", &text).unwrap();
    for cta in 0..2 {
        let a = walk(&k, cta, 0);
        let names: Vec<&str> = a.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, ["FFMA", "LDG.E", "FFMA", "LDG.E", "FFMA", "EXIT"], "CTA {cta}");
        assert_eq!((a[1].2.unwrap()[0], a[3].2.unwrap()[0]), (0x1000, 0x2000));
        assert_eq!(insts(&k.cta(0).warps[0]), insts(&k.cta(cta).warps[0]), "CTA {cta} decodes as CTA 0");
    }
    // A seen line past the warp's `insts`: the error of any extra line, at that line.
    let bad = replace_nth(&text, "insts = 6", "insts = 5", 1);
    let e = parse_traceg_str("many", &bad).unwrap_err();
    assert_eq!((e.kind, e.at.line), (TraceErrorKind::Invalid, line_of(&bad, "EXIT", 1)));
    // A seen line before the block's `warp` line.
    let bad = replace_nth(&text, "warp = 0", &format!("{ffma}\nwarp = 0"), 1);
    let e = parse_traceg_str("early", &bad).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Syntax);
    assert!(e.message.contains("before `warp = W`"), "{e}");
}

#[test]
fn error_out_of_order_and_repeated_blocks() {
    let swapped = two_ctas().replacen("thread block = 0,0,0", "thread block = 1,0,0", 1);
    let e = parse_traceg_str("order", &swapped).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Invalid);
    assert_eq!((e.at.line, e.at.col), (line_of(&swapped, "thread block", 0), 16));
    assert!(e.message.contains("(0,0,0) is next"), "{e}");
    let repeated = two_ctas().replacen("thread block = 1,0,0", "thread block = 0,0,0", 1);
    let e = parse_traceg_str("repeat", &repeated).unwrap_err();
    assert_eq!((e.kind, e.at.line), (TraceErrorKind::Invalid, line_of(&repeated, "thread block", 1)));
    let outside = two_ctas().replacen("thread block = 1,0,0", "thread block = 1,1,0", 1);
    let e = parse_traceg_str("outside", &outside).unwrap_err();
    assert!(e.message.contains("outside the grid"), "{e}");
    let extra = two_ctas() + &tb((1, 0, 0), &[&["0000 ffffffff 0 EXIT 0 0 0"]]);
    let e = parse_traceg_str("extra", &extra).unwrap_err();
    assert_eq!((e.kind, e.at.line), (TraceErrorKind::Invalid, line_of(&extra, "thread block", 2)));
    let warp = two_ctas().replacen("warp = 1", "warp = 2", 1);
    let e = parse_traceg_str("warp", &warp).unwrap_err();
    assert_eq!((e.kind, e.at.line), (TraceErrorKind::Invalid, line_of(&warp, "warp = 2", 0)));
    let twice = two_ctas().replacen("warp = 1", "warp = 0", 1);
    assert_eq!(parse_traceg_str("twice", &twice).unwrap_err().kind, TraceErrorKind::Invalid);
}

#[test]
fn error_unsupported_tracer_version() {
    for v in ["2", "6"] {
        let bad = two_ctas().replace("-accelsim tracer version = 5", &format!("-accelsim tracer version = {v}"));
        let e = parse_traceg_str("ver", &bad).unwrap_err();
        assert_eq!(e.kind, TraceErrorKind::Unsupported);
        assert_eq!((e.at.line, e.at.col), (12, 28));
    }
    let none = two_ctas().replace("-accelsim tracer version = 5\n", "");
    let e = parse_traceg_str("none", &none).unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Unsupported);
    assert_eq!(e.at.line, line_of(&none, "#traces format", 0));
    let nogrid = two_ctas().replace("-grid dim = (2,1,1)\n", "");
    assert_eq!(parse_traceg_str("g", &nogrid).unwrap_err().kind, TraceErrorKind::Invalid);
}

#[test]
fn streaming_reads_one_block_at_a_time_and_errors_stick() {
    let text = replace_nth(&two_ctas(), "0x1000", "0xZZ", 3);
    let mut r = TracegReader::new(text.as_bytes(), "s", 0).unwrap();
    assert!(r.next_cta().unwrap().is_some(), "block 0 is fine");
    let e = r.next_cta().unwrap_err();
    assert_eq!(e.kind, TraceErrorKind::Syntax);
    assert_eq!(r.next_cta().unwrap_err(), e);
    assert_eq!(r.ctas_read(), 1);
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/accelsim")
}

#[test]
fn example_trace_parses_fully() {
    let mut t = AccelSimTrace::open(&example_dir().join("kernelslist.g")).unwrap();
    assert_eq!(t.memcpys().len(), 2);
    let trace = t.read_all().unwrap();
    assert!(t.diagnostics().is_empty(), "{:?}", t.diagnostics());
    assert_eq!(trace.kernels.len(), 2);
    for k in &trace.kernels {
        k.check().unwrap();
        assert!(k.ops.iter().all(|(_, d)| d.known), "all opcodes are in the table");
    }

    let k1 = &trace.kernels[0];
    assert_eq!((k1.info.id, k1.info.name.as_str()), (0, "_Z6vecAddPKfS0_Pfi"));
    assert_eq!((k1.info.grid, k1.info.block, k1.info.sm_version), (Dim3::new(4, 1, 1), Dim3::new(128, 1, 1), 80));
    assert_eq!(k1.programs.len(), 16);
    // CTA 3, warp 3: threads 480..511 of n = 500.
    let w = walk(k1, 3, 3);
    assert_eq!(w.len(), 16);
    assert_eq!((w[5].0.as_str(), w[5].1), ("EXIT", 0xfff0_0000));
    let stg = w.iter().find(|i| i.0 == "STG.E").unwrap();
    assert_eq!(stg.1, 0x000f_ffff);
    expect_lanes(&stg.2.unwrap(), 0x000f_ffff, |l| 0x7f3a_5c00_1000 + 4 * (480 + l));
    let w = walk(k1, 1, 2);
    assert_eq!(w[5].1, 0, "in-range warps exit no lane early");
    expect_lanes(&w[10].2.unwrap(), u32::MAX, |l| 0x7f3a_5c00_0800 + 4 * (128 + 64 + l));

    let k2 = &trace.kernels[1];
    assert_eq!((k2.info.id, k2.info.smem_bytes, k2.info.warps_per_cta()), (1, 256, 2));
    let w0 = walk(k2, 1, 0);
    let w1 = walk(k2, 1, 1);
    assert_eq!((w0.len(), w1.len()), (38, 21));
    // Mode 0 STS of warp 1, mode 2 even-lane LDS, mode 2 single-lane STG of CTA 1.
    expect_lanes(&w1[7].2.unwrap(), u32::MAX, |l| 0x7f3a_7a00_0000 + 4 * (32 + l));
    expect_lanes(&w1[14].2.unwrap(), 0x5555_5555, |l| 0x7f3a_7a00_0004 + 4 * (32 + l));
    assert_eq!(w0.iter().filter(|i| i.0 == "SHFL.DOWN").count(), 5);
    assert!(w0.iter().any(|i| i.0 == "BAR.SYNC.DEFER_BLOCKING"));
    let stg = w0.iter().find(|i| i.0 == "STG.E").unwrap();
    expect_lanes(&stg.2.unwrap(), 1, |_| 0x7f3a_5c00_1804);
}

/// Everything a consumer sees reading the trace of `list` to its end: per kernel its info, then
/// per `next_cta` call (two past the last CTA: the end and errors stick) the answer and the op
/// table's size, then the trace's warnings so far.
fn transcript(list: &Path, ahead: bool) -> Vec<String> {
    let mut t = AccelSimTrace::open(list).unwrap();
    t.set_read_ahead(ahead);
    let mut out = Vec::new();
    loop {
        match t.next_kernel() {
            Ok(Some(mut k)) => {
                out.push(format!("{:?}", k.info()));
                for _ in 0..k.info().num_ctas() + 2 {
                    let r = k.next_cta();
                    out.push(format!("{r:?} ops {}", k.ops().len()));
                }
            }
            Ok(None) => break,
            Err(e) => out.push(format!("{e:?}")),
        }
        out.push(format!("{:?}", t.take_diagnostics()));
    }
    out
}

#[test]
fn read_ahead_answers_as_the_reader_itself() {
    // Kernels that read cleanly, with warnings, with a bad address in their second CTA, cut
    // short, and missing; the example trace besides.
    let d = two_kernel_dir("ahead");
    let noisy = replace_nth(&two_ctas(), "#BEGIN_TB", "# a comment the reader skips\n#BEGIN_TB", 1);
    std::fs::write(d.join("kernel-noisy.traceg"), &noisy).unwrap();
    std::fs::write(d.join("kernel-bad.traceg"), replace_nth(&two_ctas(), "0x1000", "0xZZ", 3)).unwrap();
    let full = two_ctas();
    std::fs::write(d.join("kernel-cut.traceg"), &full[..full.rfind("0010 ffffffff 0 EXIT").unwrap()]).unwrap();
    std::fs::write(
        d.join("mixed.g"),
        "kernel-1.traceg\nkernel-9.traceg\nkernel-noisy.traceg\nkernel-bad.traceg\nkernel-cut.traceg\nkernel-2.traceg\n",
    )
    .unwrap();
    for list in [d.join("mixed.g"), d.join("kernelslist.g"), example_dir().join("kernelslist.g")] {
        let inline = transcript(&list, false);
        assert!(inline.len() > 6, "{inline:?}");
        assert_eq!(transcript(&list, true), inline, "{}", list.display());
    }
    let mixed = transcript(&d.join("mixed.g"), true).join("\n");
    for want in ["kernel-9.traceg", "0xZZ", "Truncated", "a comment the reader skips"] {
        assert!(mixed.contains(want), "{want} in {mixed}");
    }

    // A consumer that stops early lets the reading thread go: the next kernel still comes.
    let mut t = AccelSimTrace::open(&d.join("mixed.g")).unwrap();
    t.set_read_ahead(true);
    assert!(t.next_kernel().unwrap().unwrap().next_cta().unwrap().is_some());
    assert!(t.next_kernel().is_err(), "kernel-9 is missing");
    assert_eq!(t.next_kernel().unwrap().unwrap().info().num_ctas(), 2);
    let _ = std::fs::remove_dir_all(&d);
}
