//! STREAM read, write ("init"), copy and triad from DRAM (validation/cuda/stream.cu), sized as the
//! simulator's `Bench::Stream`: the bytes of one kernel are `stream_l2_multiple` × the L2.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use crate::case::{Kind, Metric};
use crate::measurement::new_case;

use super::MeasureError;
use super::gpu::{alloc, drv, fill};
use super::host::{SplitMix64, uniform};
use super::kernels::STREAM;
use super::runner::Run;
use super::timing::time_runs;

const S: f32 = 1.5;

#[derive(Clone, Copy, PartialEq)]
enum K {
    Read,
    Write,
    Copy,
    Triad,
}

impl K {
    fn arrays(self) -> u64 {
        match self {
            K::Read | K::Write => 1,
            K::Copy => 2,
            K::Triad => 4,
        }
    }
    fn kernel(self) -> &'static str {
        match self {
            K::Read => "stream_read",
            K::Write => "stream_write",
            K::Copy => "stream_copy",
            K::Triad => "stream_triad",
        }
    }
    /// The reference data's `kernel` field (None for copy: correlate knows it by its source).
    fn case_kernel(self) -> Option<&'static str> {
        match self {
            K::Read => Some("read"),
            K::Write => Some("init"),
            K::Copy => None,
            K::Triad => Some("triad"),
        }
    }
    fn name(self) -> &'static str {
        match self {
            K::Read => "read",
            K::Write => "init",
            K::Copy => "copy",
            K::Triad => "triad",
        }
    }
}

/// Element `i` of input array `a` (seed a + 1).
fn input(a: u32, i: u64) -> f32 {
    uniform(i, 1000 + a)
}

pub fn run(r: &mut Run) -> Result<(), MeasureError> {
    for k in [K::Read, K::Write, K::Copy, K::Triad] {
        one(r, k)?;
    }
    Ok(())
}

/// Ranges of float4s to check, (start, count): the first and last 4096 and 64 random ones.
fn sample(n4: u64) -> Vec<(u64, u64)> {
    let head = n4.min(4096);
    let mut v = vec![(0, head), (n4 - head, head)];
    let mut rng = SplitMix64(n4);
    v.extend((0..64).map(|_| (rng.below(n4), 1)));
    v
}

/// `count` float4s from float4 `start` of `buf`.
fn read_back(r: &Run, buf: &CudaSlice<f32>, start: u64, count: u64) -> Result<Vec<f32>, MeasureError> {
    let (i, n) = (4 * start as usize, 4 * count as usize);
    r.gpu.stream.clone_dtoh(&buf.slice(i..i + n)).map_err(drv("reading results back"))
}

fn one(r: &mut Run, k: K) -> Result<(), MeasureError> {
    let l2 = r.gpu.info.l2_bytes;
    // As the simulator's Bench::Stream: per array = multiple × L2 / arrays, in whole MiB.
    let per_array = (r.plan.stream_l2_multiple * l2 / k.arrays()).div_ceil(1 << 20) << 20;
    let n4 = per_array / 16;
    let n = (4 * n4) as usize;
    let f = r.gpu.function(&STREAM, k.kernel())?;
    let mut arrays: Vec<CudaSlice<f32>> = Vec::new();
    for a in 0..k.arrays() as u32 {
        let mut buf = alloc::<f32>(&r.gpu, n, "a STREAM array")?;
        fill(&mut r.gpu, "fill_f32", &mut buf, 1000 + a)?;
        arrays.push(buf);
    }
    let threads = 1024u32;
    let ctas = 2 * r.gpu.info.sms;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let total_threads = (ctas * threads) as usize;
    let mut sums = r.gpu.stream.alloc_zeros::<f32>(total_threads).map_err(drv("allocating the sums"))?;
    let s = S;
    let stream = r.gpu.stream.clone();
    let launch = |arrays: &mut Vec<CudaSlice<f32>>, sums: &mut CudaSlice<f32>| -> Result<(), MeasureError> {
        let mut b = stream.launch_builder(&f);
        match k {
            K::Read => b.arg(&arrays[0]).arg(&n4).arg(sums),
            K::Write => b.arg(&mut arrays[0]).arg(&n4).arg(&s),
            K::Copy => {
                let (a, rest) = arrays.split_at_mut(1);
                b.arg(&mut a[0]).arg(&rest[0]).arg(&n4)
            }
            K::Triad => {
                let (a, rest) = arrays.split_at_mut(1);
                b.arg(&mut a[0]).arg(&rest[0]).arg(&rest[1]).arg(&rest[2]).arg(&n4).arg(&s)
            }
        };
        // SAFETY: the arguments match the kernel's signature in stream.cu; every array holds n4 float4s.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(drv(format!("launching {}", k.kernel())))
    };

    // Check one run against the host.
    launch(&mut arrays, &mut sums)?;
    r.gpu.sync(k.kernel())?;
    let what = format!("{} over {} MiB per array", k.kernel(), per_array >> 20);
    match k {
        K::Read => {
            let got = r.gpu.stream.clone_dtoh(&sums).map_err(drv("reading the sums"))?;
            let stride = total_threads as u64;
            let mut rng = SplitMix64(7);
            for _ in 0..64 {
                let t = rng.below(stride);
                let mut sum = 0f32;
                let mut i = t;
                while i < n4 {
                    let x = |c: u64| input(0, 4 * i + c);
                    sum += (x(0) + x(1)) + (x(2) + x(3));
                    i += stride;
                }
                if got[t as usize].to_bits() != sum.to_bits() {
                    return Err(MeasureError::Check {
                        what,
                        detail: format!("thread {t} summed {}, the host {sum}", got[t as usize]),
                    });
                }
            }
        }
        _ => {
            for (start, count) in sample(n4) {
                let got = read_back(r, &arrays[0], start, count)?;
                for (c, &g) in got.iter().enumerate() {
                    let i = 4 * start + c as u64;
                    let want = match k {
                        K::Write => S,
                        K::Copy => input(1, i),
                        _ => S.mul_add(input(2, i), input(1, i)) + input(3, i),
                    };
                    if g.to_bits() != want.to_bits() {
                        return Err(MeasureError::Check {
                            what,
                            detail: format!("element {i} is {g}, expected {want}"),
                        });
                    }
                }
            }
        }
    }

    let t = time_runs(&r.gpu, r.plan.warmups, r.plan.repetitions, |_| launch(&mut arrays, &mut sums))?;
    let bytes = k.arrays() * per_array;
    let gbps = bytes as f64 / (t.median_ms * 1e-3) / 1e9;
    let clock = r.case_clock(t.clocks)?;
    let mut c = new_case(format!("bw-dram-{}", k.name()), Kind::Bandwidth, Metric::Gbps, gbps);
    c.clock_mhz = Some(clock);
    c.level = Some("DRAM".into());
    c.kernel = k.case_kernel().map(str::to_string);
    c.implementation = Some(format!(
        "{}: grid-stride float4 loop (LDG.E.128/STG.E.128), {ctas} CTAs x 1024 threads (2 per SM)",
        k.kernel()
    ));
    c.source = format!("{} {}", STREAM.path, k.kernel());
    c.locator = r.locator(&format!(
        "stream.cu {}, {} array(s) of {} MiB ({} x the L2 moved per run)",
        k.kernel(),
        k.arrays(),
        per_array >> 20,
        r.plan.stream_l2_multiple
    ));
    c.notes = Some(format!(
        "bandwidth = {} B / median time; counts {}",
        bytes,
        match k {
            K::Read => "the bytes read",
            K::Write => "the bytes written",
            K::Copy => "bytes read plus bytes written",
            K::Triad => "3 arrays read and 1 written (a = b + s c + d), as the simulator's triad",
        }
    ));
    r.push(c);
    Ok(())
}
