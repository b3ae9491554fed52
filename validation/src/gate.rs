//! The accuracy gate: per family (case kind) of a correlation, the largest MAPE allowed and the
//! fewest cases that must have been simulated. CI runs `gpusim correlate --gate FILE` on the
//! reference data and fails when a family breaks its line.
//!
//! The thresholds live in one file (`validation/accuracy-gate.toml`) and may only be tightened:
//! [`Gate::loosened_from`] compares a gate with an earlier version of itself and names every
//! threshold that moved the wrong way (CI compares with the previous commit's file). A family's
//! `min_cases` keeps a gate from passing because cases stopped being simulated. `[family.<kind>]`
//! tables hold the lines for the built-in presets (`--arch auto`), `[calibrated.<kind>]` tables
//! those for the calibrated presets (`--arch calibrated`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::correlate::Correlation;

/// One family's line.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyGate {
    /// Largest mean |error| allowed, in percent.
    pub max_mape_pct: f64,
    /// Fewest cases of the family that must have been simulated.
    pub min_cases: usize,
    /// Judge the family on sampled runs (`--sample`'s defaults), not full detail. Only for a
    /// family whose sampling `tests/sampling.rs` validates against full detail (the attention
    /// families: full detail of their long cases takes hours).
    #[serde(default)]
    pub sampled: bool,
}

/// A whole gate file: `[family.<kind>]` tables (built-in presets) and `[calibrated.<kind>]`
/// tables (calibrated presets).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    #[serde(default)]
    pub family: BTreeMap<String, FamilyGate>,
    #[serde(default)]
    pub calibrated: BTreeMap<String, FamilyGate>,
}

/// Which presets a correlation ran on, so which lines of a gate apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presets {
    BuiltIn,
    Calibrated,
}

/// One family's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyResult {
    pub family: String,
    pub gate: FamilyGate,
    /// Cases of the family that were simulated.
    pub cases: usize,
    /// Their MAPE in percent (None: none simulated).
    pub mape_pct: Option<f64>,
}

impl FamilyResult {
    pub fn passed(&self) -> bool {
        self.cases >= self.gate.min_cases && self.mape_pct.is_some_and(|m| m <= self.gate.max_mape_pct)
    }
}

impl fmt::Display for FamilyResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mape = self.mape_pct.map_or("–".to_string(), |m| format!("{m:.2}%"));
        write!(
            f,
            "{:<10} MAPE {:>8} (max {:.2}%)  cases {:>3} (min {:>3})  {}",
            self.family,
            mape,
            self.gate.max_mape_pct,
            self.cases,
            self.gate.min_cases,
            if self.passed() { "ok" } else { "FAILED" }
        )
    }
}

impl Gate {
    /// Parses a gate file; errors name the file (and line, for TOML errors).
    pub fn parse(path: &Path, text: &str) -> Result<Gate, String> {
        let g: Gate = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1)).unwrap_or(1);
            format!("{}:{line}: {}", path.display(), e.message().trim())
        })?;
        if g.family.is_empty() {
            return Err(format!("{}: no [family.<kind>] table", path.display()));
        }
        for (table, fams) in [("family", &g.family), ("calibrated", &g.calibrated)] {
            for (name, f) in fams {
                if !(f.max_mape_pct.is_finite() && f.max_mape_pct >= 0.0) {
                    return Err(format!(
                        "{}: {table}.{name}.max_mape_pct = {} is not a percentage",
                        path.display(),
                        f.max_mape_pct
                    ));
                }
            }
        }
        Ok(g)
    }

    pub fn load(path: &Path) -> Result<Gate, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        Gate::parse(path, &text)
    }

    /// The lines that apply to a correlation on `presets`.
    pub fn lines(&self, presets: Presets) -> &BTreeMap<String, FamilyGate> {
        match presets {
            Presets::BuiltIn => &self.family,
            Presets::Calibrated => &self.calibrated,
        }
    }

    /// The families the lines for `presets` judge on sampled runs.
    pub fn sampled_families(&self, presets: Presets) -> std::collections::BTreeSet<String> {
        self.lines(presets).iter().filter(|(_, g)| g.sampled).map(|(n, _)| n.clone()).collect()
    }

    /// Every family of the gate's lines for `presets` against `c` (a family the correlation lacks
    /// has 0 cases).
    pub fn check(&self, c: &Correlation, presets: Presets) -> Vec<FamilyResult> {
        self.lines(presets)
            .iter()
            .map(|(name, g)| {
                let stats = c.summary.by_group.get(name);
                FamilyResult {
                    family: name.clone(),
                    gate: g.clone(),
                    cases: stats.map_or(0, |s| s.n),
                    mape_pct: stats.and_then(|s| s.mape).map(|m| 100.0 * m),
                }
            })
            .collect()
    }

    /// What `self` loosened relative to `earlier`: a family dropped, a MAPE limit raised, a case
    /// minimum lowered. Empty when `self` only keeps or tightens.
    pub fn loosened_from(&self, earlier: &Gate) -> Vec<String> {
        let mut out = Vec::new();
        for (table, now, before) in
            [("family", &self.family, &earlier.family), ("calibrated", &self.calibrated, &earlier.calibrated)]
        {
            for (name, old) in before {
                match now.get(name) {
                    None => out.push(format!("{table} `{name}` was removed")),
                    Some(new) => {
                        if new.max_mape_pct > old.max_mape_pct {
                            out.push(format!(
                                "{table} `{name}`: max_mape_pct raised from {} to {}",
                                old.max_mape_pct, new.max_mape_pct
                            ));
                        }
                        if new.sampled && !old.sampled {
                            out.push(format!("{table} `{name}`: now judged on sampled runs, before in full detail"));
                        }
                        if new.min_cases < old.min_cases {
                            out.push(format!(
                                "{table} `{name}`: min_cases lowered from {} to {}",
                                old.min_cases, new.min_cases
                            ));
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATE: &str =
        "[family.gemm]\nmax_mape_pct = 15.0\nmin_cases = 19\n\n[family.latency]\nmax_mape_pct = 5\nmin_cases = 20\n";

    #[test]
    fn parses_and_rejects_bad_files() {
        let g = Gate::parse(Path::new("g.toml"), GATE).unwrap();
        assert_eq!(g.family["gemm"], FamilyGate { max_mape_pct: 15.0, min_cases: 19, sampled: false });
        let e = Gate::parse(Path::new("g.toml"), "[family.gemm]\nmax_mape = 1\nmin_cases = 1\n").unwrap_err();
        assert!(e.starts_with("g.toml:") && e.contains("max_mape"), "{e}");
        assert!(Gate::parse(Path::new("g.toml"), "").unwrap_err().contains("no [family"));
        let neg = "[family.gemm]\nmax_mape_pct = -1\nmin_cases = 1\n";
        assert!(Gate::parse(Path::new("g.toml"), neg).unwrap_err().contains("percentage"));
    }

    #[test]
    fn the_shipped_gate_covers_the_reference_families() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("accuracy-gate.toml");
        let g = Gate::load(&path).unwrap();
        for presets in [Presets::BuiltIn, Presets::Calibrated] {
            for family in ["gemm", "latency", "bandwidth"] {
                let f = &g.lines(presets)[family];
                assert!(f.min_cases > 0 && f.max_mape_pct > 0.0, "{family} ({presets:?}): {f:?}");
            }
        }
    }

    /// `sampled = true` marks the families judged on sampled runs, per table.
    #[test]
    fn sampled_families_come_from_the_lines() {
        let text = format!(
            "{GATE}\n[family.attention-fa2]\nmax_mape_pct = 8\nmin_cases = 22\nsampled = true\n\n[calibrated.gemm]\nmax_mape_pct = 6\nmin_cases = 19\n"
        );
        let g = Gate::parse(Path::new("g.toml"), &text).unwrap();
        assert_eq!(g.sampled_families(Presets::BuiltIn).into_iter().collect::<Vec<_>>(), ["attention-fa2"]);
        assert!(g.sampled_families(Presets::Calibrated).is_empty());
        assert!(!g.family["gemm"].sampled, "full detail unless a line says otherwise");
        let bad = format!("{GATE}\n[family.moe]\nmax_mape_pct = 8\nmin_cases = 2\nsampled = 1\n");
        assert!(Gate::parse(Path::new("g.toml"), &bad).is_err());
    }

    #[test]
    fn only_tightening_is_allowed() {
        let old = Gate::parse(Path::new("old"), GATE).unwrap();
        let mut new = old.clone();
        assert!(new.loosened_from(&old).is_empty());
        new.family.get_mut("gemm").unwrap().max_mape_pct = 12.0;
        new.family.get_mut("latency").unwrap().min_cases = 25;
        assert!(new.loosened_from(&old).is_empty(), "tightening is fine");
        new.family.get_mut("gemm").unwrap().max_mape_pct = 16.0;
        new.family.get_mut("latency").unwrap().min_cases = 3;
        new.family.insert("moe".into(), FamilyGate { max_mape_pct: 50.0, min_cases: 1, sampled: false });
        let l = new.loosened_from(&old);
        assert_eq!(l.len(), 2, "{l:?}");
        new.family.get_mut("latency").unwrap().sampled = true;
        assert!(new.loosened_from(&old).iter().any(|m| m.contains("`latency`: now judged on sampled runs")));
        new.family.remove("gemm");
        assert!(new.loosened_from(&old).iter().any(|m| m.contains("removed")));
        // The calibrated lines are held to the same rule.
        let text = format!("{GATE}\n[calibrated.gemm]\nmax_mape_pct = 6.0\nmin_cases = 19\n");
        let old = Gate::parse(Path::new("old"), &text).unwrap();
        assert_eq!(old.lines(Presets::Calibrated)["gemm"].max_mape_pct, 6.0);
        let mut new = old.clone();
        new.calibrated.get_mut("gemm").unwrap().max_mape_pct = 7.0;
        assert_eq!(new.loosened_from(&old), ["calibrated `gemm`: max_mape_pct raised from 6 to 7"]);
        new.calibrated.clear();
        assert_eq!(new.loosened_from(&old), ["calibrated `gemm` was removed"]);
    }

    #[test]
    fn a_family_passes_only_with_enough_cases_under_its_limit() {
        let gate = FamilyGate { max_mape_pct: 10.0, min_cases: 3, sampled: false };
        let r = |cases, mape_pct| FamilyResult { family: "gemm".into(), gate: gate.clone(), cases, mape_pct };
        assert!(r(3, Some(9.9)).passed());
        assert!(r(3, Some(10.0)).passed());
        assert!(!r(3, Some(10.1)).passed());
        assert!(!r(2, Some(1.0)).passed(), "too few cases simulated");
        assert!(!r(0, None).passed());
        assert!(r(2, Some(1.0)).to_string().contains("FAILED"));
    }
}
