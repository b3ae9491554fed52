//! Routing: how many tokens each expert receives when every token picks `topk` distinct experts.
//!
//! - `uniform`: each token draws `topk` distinct experts uniformly.
//! - `zipf:S`: expert popularity follows Zipf with exponent `S` over a seeded permutation of the
//!   experts (weight `1/(rank+1)^S`); each token draws `topk` distinct experts by weight, without
//!   replacement.
//! - an explicit list of per-expert counts (`list:3,0,5,...` or a file of numbers): checked to sum
//!   to `tokens·topk` with no count above `tokens` (each token picks an expert at most once).
//!
//! Deterministic for a seed: a SplitMix64 generator owned by the call, no global state. The Zipf
//! weights use one `powf` per expert (the platform's libm; every draw after that is integer).

use std::fmt;

/// Where the per-expert counts come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Routing {
    Uniform,
    Zipf(f64),
    Counts(Vec<u64>),
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routing::Uniform => f.write_str("uniform"),
            Routing::Zipf(s) => write!(f, "zipf:{s}"),
            Routing::Counts(c) => write!(f, "counts of {} experts", c.len()),
        }
    }
}

impl Routing {
    /// `uniform`, `zipf:S` (0 < S ≤ 10) or `list:N,N,...`; a file is read by the caller and given
    /// as `list:` of its numbers ([`parse_counts`]).
    pub fn parse(s: &str) -> Result<Routing, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("uniform") {
            return Ok(Routing::Uniform);
        }
        if let Some(x) = t.strip_prefix("zipf:") {
            let v: f64 = x.trim().parse().map_err(|_| format!("routing `{s}`: `{x}` is not a number"))?;
            if !(v > 0.0 && v <= 10.0) {
                return Err(format!("routing `{s}`: the Zipf exponent must be in (0, 10]"));
            }
            return Ok(Routing::Zipf(v));
        }
        if let Some(x) = t.strip_prefix("list:") {
            return parse_counts(x).map(Routing::Counts);
        }
        Err(format!("routing `{s}`: expected uniform, zipf:S, list:N,N,... or a file of counts"))
    }
}

/// Per-expert counts written as numbers separated by commas, spaces or newlines (`#` comments).
pub fn parse_counts(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for w in line.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
            out.push(w.parse::<u64>().map_err(|_| format!("line {}: `{w}` is not a token count", i + 1))?);
        }
    }
    if out.is_empty() {
        return Err("no token counts given".into());
    }
    Ok(out)
}

/// Tokens per expert for `tokens` tokens each picking `topk` distinct of `experts` experts.
pub fn expert_counts(tokens: u64, experts: u64, topk: u64, routing: &Routing, seed: u64) -> Result<Vec<u64>, String> {
    if experts == 0 || topk == 0 || topk > experts {
        return Err(format!("topk = {topk} must be between 1 and the {experts} experts"));
    }
    if let Routing::Counts(c) = routing {
        if c.len() as u64 != experts {
            return Err(format!("{} token counts given for {experts} experts", c.len()));
        }
        let sum: u64 = c.iter().sum();
        if sum != tokens * topk {
            return Err(format!("the counts sum to {sum}, not tokens·topk = {}", tokens * topk));
        }
        if let Some((e, n)) = c.iter().enumerate().find(|(_, n)| **n > tokens) {
            return Err(format!("expert {e}: {n} tokens, more than the {tokens} there are"));
        }
        return Ok(c.clone());
    }
    let mut rng = crate::rng::SplitMix64(seed ^ 0x6d6f_655f_726f_7574);
    // Integer weights: uniform 1 each; Zipf 2^40/(rank+1)^s over a shuffled ranking.
    let weights: Vec<u64> = match routing {
        Routing::Zipf(s) => {
            let mut rank: Vec<u64> = (0..experts).collect();
            for i in (1..experts as usize).rev() {
                rank.swap(i, rng.below(i as u64 + 1) as usize);
            }
            rank.iter().map(|&r| (((1u64 << 40) as f64) / ((r + 1) as f64).powf(*s)).max(1.0) as u64).collect()
        }
        _ => vec![1; experts as usize],
    };
    let mut counts = vec![0u64; experts as usize];
    let mut taken = vec![false; experts as usize];
    let mut picked = Vec::with_capacity(topk as usize);
    for _ in 0..tokens {
        let mut left: u64 = weights.iter().sum();
        picked.clear();
        for _ in 0..topk {
            let mut x = rng.below(left);
            let e = (0..experts as usize)
                .find(|&e| {
                    if taken[e] {
                        return false;
                    }
                    if x < weights[e] {
                        return true;
                    }
                    x -= weights[e];
                    false
                })
                .unwrap_or(0);
            taken[e] = true;
            left -= weights[e];
            picked.push(e);
            counts[e] += 1;
        }
        for &e in &picked {
            taken[e] = false;
        }
    }
    Ok(counts)
}
