//! Host-side twins of what the kernels compute, for checking results without copying inputs
//! back: the fills of validation/cuda/util.cu bit for bit, the pointer-chase permutation, and the
//! statistics. No GPU needed: all of it is tested on the CPU.

/// validation/cuda/util.cu `mix32` (the "lowbias32" integer hash).
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// validation/cuda/util.cu `uniform(i, seed)`: element `i` of a fill with `seed`, in [-1, 1),
/// exactly as the device computes it (every step is exact in fp32).
pub fn uniform(i: u64, seed: u32) -> f32 {
    let hi = (i >> 32) as u32;
    let h = mix32((i as u32) ^ mix32(seed ^ hi.wrapping_mul(0x9e37_79b9)));
    (h >> 8) as f32 * (1.0 / 8_388_608.0) - 1.0
}

/// Round to nearest even, as `cvt.rn.bf16.f32` (finite inputs).
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let round = 0x7fff + ((b >> 16) & 1);
    ((b + round) >> 16) as u16
}

pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Round to nearest even, as `cvt.rn.f16.f32`, for |x| ≤ 1 (the fills' range: normal or
/// subnormal halves, no overflow).
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = f32::from_bits(b & 0x7fff_ffff);
    if a == 0.0 {
        return sign;
    }
    // Scale so that the half's last mantissa bit is the unit, round to nearest even, rebuild.
    let e = ((b >> 23) & 0xff) as i32 - 127; // unbiased exponent of x
    let unit_exp = (e - 10).max(-24); // exponent of the half's ulp at this magnitude
    let scaled = a as f64 / 2f64.powi(unit_exp);
    let mut q = scaled.round_ties_even() as u32;
    let mut exp = unit_exp;
    // q has 11 bits (normal) or fewer (subnormal); a carry to 2048 moves up one binade.
    if q >= 2048 {
        q >>= 1;
        exp += 1;
    }
    let bits = if exp == -24 && q < 1024 {
        q // subnormal
    } else {
        let biased = (exp + 10 + 15) as u32;
        (biased << 10) | (q & 0x3ff)
    };
    sign | bits as u16
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    let v = if e == 0 { m * 2f64.powi(-24) } else { (1.0 + m / 1024.0) * 2f64.powi(e - 15) };
    (sign * v) as f32
}

/// The largest finite e4m3 value, 1.75 · 2^8 (bits 0x7e): e4m3 has no infinities, and 0x7f is NaN.
pub const E4M3_MAX: f32 = 448.0;

/// fp8 e4m3 (OCP/NVIDIA "E4M3FN": 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no
/// infinities, NaN = S.1111.111) of `x`, rounded to nearest even with saturation, as
/// `cvt.rn.satfinite.e4m3x2.f32` (validation/cuda/util.cu `fill_e4m3`): magnitudes beyond 448
/// (infinities included) become ±448, NaN becomes 0x7f. Exact for every f32.
pub fn e4m3_bits(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs();
    // Half the smallest subnormal (2^-10) or less rounds to zero (the tie goes to the even 0);
    // this also keeps f32 subnormals, whose exponent field reads 0, out of the path below.
    if a <= 2f32.powi(-10) {
        return sign;
    }
    // From 448 up, round-to-nearest gives 448 (below 464) or the NaN pattern and beyond (from
    // 464); .satfinite clamps both to 448.
    if a >= E4M3_MAX {
        return sign | 0x7e;
    }
    let e = ((a.to_bits() >> 23) & 0xff) as i32 - 127; // unbiased exponent of a normal f32
    // The e4m3 ulp at this magnitude: 2^(e-3) for normals, 2^-9 below the smallest normal 2^-6.
    let mut unit_exp = (e - 3).max(-9);
    // a / 2^unit_exp is exact in f64 (24 significant bits), and so is its rounding.
    let mut q = (a as f64 / 2f64.powi(unit_exp)).round_ties_even() as u32;
    if q >= 16 {
        // Rounded up into the next binade: 16 · 2^u = 8 · 2^(u+1).
        q >>= 1;
        unit_exp += 1;
    }
    // Below 448 the rounding stays at or under 448 = 14 · 2^5 (0x7e), so no NaN pattern here.
    let bits = if q < 8 {
        q // subnormal: unit_exp is -9 (q = 0 cannot happen: a > 2^-10)
    } else {
        let biased = (unit_exp + 3 + 7) as u32;
        (biased << 3) | (q & 7)
    };
    sign | bits as u8
}

/// The value of an e4m3 byte (NaN for 0x7f and 0xff).
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xf) as i32;
    let m = (b & 7) as f32;
    if e == 15 && m == 7.0 {
        return f32::NAN;
    }
    // Every e4m3 value is exact in f32; powi of 2 is exact.
    let v = if e == 0 { m * 2f32.powi(-9) } else { (1.0 + m / 8.0) * 2f32.powi(e - 7) };
    sign * v
}

pub fn round_e4m3(x: f32) -> f32 {
    e4m3_to_f32(e4m3_bits(x))
}

/// Host-side choices (permutations, samples) draw from the project's one seeded generator.
pub use gpusim_workloads::rng::SplitMix64;

/// A single random cycle through `0..n` (Sattolo's algorithm): `next[i]` follows `i`, and walking
/// from any element visits all `n` before returning. `n` ≤ 2^32.
pub fn cyclic_permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut items: Vec<u32> = (0..n as u64).map(|i| i as u32).collect();
    let mut rng = SplitMix64(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64) as usize; // j < i: Sattolo, not Fisher–Yates
        items.swap(i, j);
    }
    // items is a cyclic order; next[items[k]] = items[k + 1].
    let mut next = vec![0u32; n];
    for k in 0..n {
        next[items[k] as usize] = items[(k + 1) % n];
    }
    next
}

/// Where a walk of `steps` steps from `start` ends.
pub fn walk(next: &[u32], start: u32, steps: u64) -> u32 {
    let n = next.len() as u64;
    let mut p = start;
    for _ in 0..steps % n.max(1) {
        p = next[p as usize];
    }
    p
}

/// The median (mean of the middle two for an even count); NaN for none.
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// The wrapping u32 sum that smem_lds (validation/cuda/smem.cu) returns for a lane.
pub fn smem_expected(lane: u32, stride: u32, iters: u32) -> u32 {
    let base = (lane * stride) % 1024;
    let per_iter = (0..16u32).fold(0u32, |acc, j| acc.wrapping_add(mix32(base + 32 * j)));
    per_iter.wrapping_mul(iters)
}

/// Reference for one entry C[i, j] = Σ_l A[i, l]·B[l, j] of a GEMM whose A and B were filled by
/// `fill_<type>` with seeds `seed_a`, `seed_b`; `a_index(l)` and `b_index(l)` give the element
/// index of A[i, l] and B[l, j] in their buffers (the layout). Returns the value (f64 sum of the
/// exact products of the rounded inputs) and Σ|a·b| (the scale of the rounding error).
pub fn gemm_entry(
    round: fn(f32) -> f32,
    k: u64,
    a_index: impl Fn(u64) -> u64,
    b_index: impl Fn(u64) -> u64,
    seed_a: u32,
    seed_b: u32,
) -> (f64, f64) {
    let (mut sum, mut abs) = (0f64, 0f64);
    for l in 0..k {
        let a = round(uniform(a_index(l), seed_a)) as f64;
        let b = round(uniform(b_index(l), seed_b)) as f64;
        sum += a * b;
        abs += (a * b).abs();
    }
    (sum, abs)
}

pub fn round_bf16(x: f32) -> f32 {
    bf16_to_f32(bf16_bits(x))
}

pub fn round_f16(x: f32) -> f32 {
    f16_to_f32(f16_bits(x))
}

/// Whether a GEMM output entry (already rounded to a 16-bit type whose relative step is `eps`)
/// agrees with its reference: within 2 ulps of the output type plus fp32 accumulation error.
pub fn gemm_entry_ok(got: f64, reference: f64, abs_sum: f64, eps: f64) -> bool {
    gemm_entry_within(got, reference, abs_sum, eps, 1e-4)
}

/// [`gemm_entry_ok`] with the accumulation error allowed as `acc` · Σ|a·b| (1e-4 for fp32
/// accumulation through the whole sum; more where the tensor cores keep fewer bits between
/// promotions, as for fp8 on Hopper).
pub fn gemm_entry_within(got: f64, reference: f64, abs_sum: f64, eps: f64, acc: f64) -> bool {
    got.is_finite() && (got - reference).abs() <= 2.0 * eps * reference.abs() + acc * abs_sum + 1e-6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_in_range_and_exact() {
        let mut seen_neg = false;
        for i in [0u64, 1, 2, 1000, 1 << 32, (1 << 40) + 7, u64::MAX] {
            for seed in [0u32, 1, 0xdead_beef] {
                let x = uniform(i, seed);
                assert!((-1.0..1.0).contains(&x), "{x}");
                // 24 random bits: x + 1 is a multiple of 2^-23.
                let scaled = (x as f64 + 1.0) * 8_388_608.0;
                assert_eq!(scaled, scaled.round());
                seen_neg |= x < 0.0;
            }
        }
        assert!(seen_neg);
        assert_ne!(uniform(5, 1), uniform(5, 2));
        assert_ne!(uniform(5, 1), uniform(6, 1));
        // A bijection: no two of the first 2^16 inputs collide.
        let mut hs: Vec<u32> = (0..1u32 << 16).map(mix32).collect();
        hs.sort_unstable();
        hs.dedup();
        assert_eq!(hs.len(), 1 << 16);
    }

    #[test]
    fn half_roundings_match_known_values() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(bf16_bits(-1.0), 0xbf80);
        assert_eq!(bf16_bits(1.0 + 1.0 / 256.0), 0x3f80); // tie to even
        assert_eq!(bf16_bits(1.0 + 3.0 / 256.0), 0x3f82); // tie to even (up)
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-0.5), 0xb800);
        assert_eq!(f16_bits(1.0 + 1.0 / 2048.0), 0x3c00); // tie to even
        assert_eq!(f16_bits(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f16_bits(2f32.powi(-24)), 0x0001); // smallest subnormal
        assert_eq!(f16_bits(2f32.powi(-14)), 0x0400); // smallest normal
        assert_eq!(f16_bits(0.999_99), 0x3c00); // rounds up into the next binade
        for x in [0.1f32, -0.3, 0.75, 2f32.powi(-20), -0.999] {
            assert!((round_f16(x) - x).abs() <= x.abs() * 2f32.powi(-11) + 2f32.powi(-25), "{x}");
            assert!((round_bf16(x) - x).abs() <= x.abs() * 2f32.powi(-8), "{x}");
            assert_eq!(f16_to_f32(f16_bits(round_f16(x))), round_f16(x));
        }
    }

    /// The nearest finite e4m3 value to `x` by search over all 254 of them, ties to the even
    /// mantissa, magnitudes beyond 448 saturated: an independent reference for `e4m3_bits`.
    fn e4m3_by_search(x: f32) -> u8 {
        if x.is_nan() {
            return 0x7f;
        }
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = (x.abs() as f64).min(E4M3_MAX as f64);
        let mut best = 0u8;
        for b in 0..=0x7eu8 {
            let (d, db) = ((e4m3_to_f32(b) as f64 - a).abs(), (e4m3_to_f32(best) as f64 - a).abs());
            if d < db || (d == db && b & 1 == 0) {
                best = b;
            }
        }
        sign | best
    }

    #[test]
    fn e4m3_known_values() {
        assert_eq!(e4m3_bits(1.0), 0x38);
        assert_eq!(e4m3_bits(-1.0), 0xb8);
        assert_eq!(e4m3_bits(0.5), 0x30);
        assert_eq!(e4m3_bits(-2.0), 0xc0);
        assert_eq!(e4m3_bits(448.0), 0x7e);
        assert_eq!(e4m3_bits(2f32.powi(-6)), 0x08); // smallest normal
        assert_eq!(e4m3_bits(2f32.powi(-9)), 0x01); // smallest subnormal
        assert_eq!(e4m3_bits(7.0 * 2f32.powi(-9)), 0x07); // largest subnormal
        assert_eq!(e4m3_bits(0.0), 0x00);
        assert_eq!(e4m3_bits(-0.0), 0x80);
        // Ties to even: 1 + 1/16 lies between 1 (mantissa 0) and 1.125 (mantissa 1).
        assert_eq!(e4m3_bits(1.0 + 1.0 / 16.0), 0x38);
        assert_eq!(e4m3_bits(1.0 + 3.0 / 16.0), 0x3a);
        assert_eq!(e4m3_bits(2f32.powi(-10)), 0x00); // half the smallest subnormal: to 0
        assert_eq!(e4m3_bits(3.0 * 2f32.powi(-10)), 0x02); // 1.5 subnormal steps: to 2
        assert_eq!(e4m3_bits(1.0 - 1.0 / 64.0), 0x38); // rounds up into the next binade
        assert_eq!(e4m3_bits(15.5 * 2f32.powi(-10)), 0x08); // up from the subnormals to 2^-6
        // Saturation, no infinities; NaN stays NaN.
        assert_eq!(e4m3_bits(460.0), 0x7e);
        assert_eq!(e4m3_bits(464.0), 0x7e);
        assert_eq!(e4m3_bits(1e6), 0x7e);
        assert_eq!(e4m3_bits(f32::INFINITY), 0x7e);
        assert_eq!(e4m3_bits(f32::NEG_INFINITY), 0xfe);
        assert_eq!(e4m3_bits(f32::NAN), 0x7f);
        assert_eq!(e4m3_bits(f32::from_bits(1)), 0x00); // an f32 subnormal
        assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0xfe), -448.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x3c), 1.5);
    }

    #[test]
    fn e4m3_round_trips_and_matches_a_search() {
        // Every byte decodes to a value that encodes back to it (NaNs to the canonical 0x7f).
        let mut values = Vec::new();
        for b in 0..=255u8 {
            let v = e4m3_to_f32(b);
            if b & 0x7f == 0x7f {
                assert_eq!(e4m3_bits(v), 0x7f);
                continue;
            }
            assert_eq!(e4m3_bits(v), b, "{b:#04x} = {v}");
            if b & 0x80 == 0 {
                values.push(v);
            }
        }
        // Strictly increasing in the bits: no gaps or overlaps in the encoding.
        assert!(values.windows(2).all(|w| w[0] < w[1]));
        // Midpoints between neighbours (every tie), points just off them, and the fills' values.
        let mut xs: Vec<f32> = Vec::new();
        for w in values.windows(2) {
            let mid = 0.5 * (w[0] + w[1]); // exact in f32
            xs.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1)]);
        }
        xs.extend((0..20_000u64).map(|i| uniform(i, 11)));
        xs.extend((0..20_000u64).map(|i| uniform(i, 12) * 500.0));
        let mut rng = SplitMix64(5);
        xs.extend((0..20_000).map(|_| f32::from_bits(rng.next_u64() as u32)));
        for x in xs {
            assert_eq!(e4m3_bits(x), e4m3_by_search(x), "{x:e}");
            assert_eq!(e4m3_bits(-x), e4m3_by_search(-x), "{:e}", -x);
        }
        // The fills' range [-1, 1): never saturated, within half an ulp (relative 2^-4 for normals).
        for i in 0..1000u64 {
            let x = uniform(i, 3);
            let r = round_e4m3(x);
            assert!((r - x).abs() <= (x.abs() * 2f32.powi(-4)).max(2f32.powi(-10)), "{x} -> {r}");
        }
    }

    #[test]
    fn permutation_is_one_cycle() {
        for n in [1usize, 2, 3, 17, 1000] {
            let next = cyclic_permutation(n, 42);
            let mut p = 0u32;
            let mut seen = vec![false; n];
            for _ in 0..n {
                assert!(!seen[p as usize], "n = {n}: revisited {p}");
                seen[p as usize] = true;
                p = next[p as usize];
            }
            assert_eq!(p, 0, "n = {n}: not a single cycle");
            assert_eq!(walk(&next, 0, n as u64), 0);
            assert_eq!(walk(&next, 0, 1), next[0]);
        }
        assert_eq!(cyclic_permutation(100, 1), cyclic_permutation(100, 1));
        assert_ne!(cyclic_permutation(100, 1), cyclic_permutation(100, 2));
    }

    #[test]
    fn statistics_and_checks() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        // The smem expectation wraps like the device's u32 adds.
        let s = smem_expected(3, 2, 1);
        let direct = (0..16u32).fold(0u32, |a, j| a.wrapping_add(mix32(6 + 32 * j)));
        assert_eq!(s, direct);
        assert_eq!(smem_expected(3, 2, 3), direct.wrapping_mul(3));
        // Stride 32: every lane reads the same words (bank 0), so every lane's sum is the same.
        assert_eq!(smem_expected(0, 32, 5), smem_expected(0, 32, 5));
        assert_ne!(smem_expected(1, 32, 1), smem_expected(0, 32, 1));
        // A GEMM entry from the fills: a tiny product by hand.
        // Column-major 2 × 3 A, entry (1, 0).
        let (v, a) = gemm_entry(round_bf16, 3, |l| 1 + 2 * l, |l| l, 7, 9);
        let by_hand: f64 =
            (0..3u64).map(|l| round_bf16(uniform(1 + 2 * l, 7)) as f64 * round_bf16(uniform(l, 9)) as f64).sum();
        assert_eq!(v, by_hand);
        assert!(a >= v.abs());
        assert!(gemm_entry_ok(v * (1.0 + 1e-3), v, a, 1.0 / 256.0));
        assert!(!gemm_entry_ok(v + 10.0 * a.max(1.0), v, a, 1.0 / 256.0));
        assert!(!gemm_entry_ok(f64::NAN, v, a, 1.0 / 256.0));
    }
}
