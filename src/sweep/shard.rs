//! `--shard I/N`: which points one of N independent runs takes. Point `p` belongs to shard
//! `p mod N`, so the shards are disjoint, cover every point, and each gets a spread of the study
//! (neighbouring points often cost alike). Pure.

/// Shard `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole study.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` with 0 ≤ I < N.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard `{text}`: expected I/N with 0 ≤ I < N, such as 0/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether point `point` (its index in the study) is this shard's.
    pub fn contains(&self, point: usize) -> bool {
        point % self.count == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_points() {
        let n = 3;
        let shards: Vec<Shard> = (0..n).map(|i| Shard::parse(&format!("{i}/{n}")).unwrap()).collect();
        for p in 0..20 {
            assert_eq!(shards.iter().filter(|s| s.contains(p)).count(), 1, "point {p}");
        }
        assert!((0..5).all(|p| Shard::ALL.contains(p)));
        assert_eq!(Shard::parse(" 1 / 2 ").unwrap(), Shard { index: 1, count: 2 });
    }

    #[test]
    fn bad_shards_are_errors() {
        for t in ["2/2", "0/0", "1", "a/2", "-1/2", "1/2/3"] {
            assert!(Shard::parse(t).unwrap_err().contains("I/N"), "{t}");
        }
    }
}
