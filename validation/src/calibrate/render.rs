//! How a [`Calibration`] and a [`Transfer`] are shown: terminal text, calibration.md, and the
//! calibrated config (`-o`). Plain formatting of the data [`super`] computed.

use super::{Calibration, Transfer};
use crate::correlate::{CALIBRATED_SUFFIX, num};
use gpusim_configs::load_preset;

fn bound(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { num(v) }
}

fn pct(v: f64) -> String {
    format!("{:.2}%", 100.0 * v)
}

impl Calibration {
    /// Per fitted parameter: key, preset value, fitted value, bounds, where the bounds come from.
    pub fn param_rows(&self) -> Vec<[String; 5]> {
        self.params
            .iter()
            .zip(&self.fitted)
            .map(|(p, v)| {
                [
                    p.key.clone(),
                    p.show(p.preset_value),
                    p.show(*v),
                    format!("[{}, {}]", bound(p.lo), bound(p.hi)),
                    p.bounds_from.clone(),
                ]
            })
            .collect()
    }

    /// Per error measure: what, MAPE, weighted |ln(sim/meas)|.
    pub fn error_rows(&self) -> Vec<[String; 3]> {
        let mut rows = vec![
            ["before (preset), all cases".to_string(), pct(self.before.mape), format!("{:.4}", self.before.wlog)],
            ["after (final fit), all cases".to_string(), pct(self.after.mape), format!("{:.4}", self.after.wlog)],
        ];
        if let Some(cv) = &self.cv {
            rows.push([format!("{}-fold CV training", cv.k), pct(cv.train_mape), format!("{:.4}", cv.train_wlog)]);
            rows.push([
                format!("{}-fold CV validation", cv.k),
                pct(cv.validation_mape),
                format!("{:.4}", cv.validation_wlog),
            ]);
        }
        rows
    }

    /// Plain-text tables for the terminal.
    pub fn text(&self) -> String {
        let mut s = format!("calibration of {} on {} case(s)\n\n", self.preset, self.cases.len());
        s += &format!("{:<28} {:>14} {:>14} {:>20}  bounds from\n", "parameter", "preset", "fitted", "bounds");
        for r in self.param_rows() {
            s += &format!("{:<28} {:>14} {:>14} {:>20}  {}\n", r[0], r[1], r[2], r[3], r[4]);
        }
        s += &format!("\n{:<32} {:>8} {:>22}\n", "errors", "MAPE", "weighted |ln(sim/meas)|");
        for r in self.error_rows() {
            s += &format!("{:<32} {:>8} {:>22}\n", r[0], r[1], r[2]);
        }
        match &self.cv {
            None => s += "(no cross-validation: fewer than 2 cases or folds)\n",
            Some(cv) => {
                s += &format!("\n{:<32} {:>6} {:>8} {:>10}\n", "out-of-fold, by kind", "cases", "MAPE", "max |err|");
                for (kind, n, mape, max) in &cv.by_kind {
                    s += &format!("{:<32} {:>6} {:>8} {:>10}\n", kind, n, pct(*mape), pct(*max));
                }
            }
        }
        s += &format!("\n{:<32} {:>10} {:>10} {:>10}\n", "case", "measured", "before", "after");
        for c in &self.cases {
            let o = |v: Option<f64>| v.map_or("failed".into(), num);
            s += &format!("{:<32} {:>10} {:>10} {:>10}\n", c.id, num(c.measured), o(c.before), o(c.after));
        }
        for (id, why) in &self.skipped {
            s += &format!("skipped {id}: {why}\n");
        }
        s += &format!("\n{} simulation(s)", self.simulations);
        if self.reused > 0 {
            s += &format!(", {} more kept by an earlier run (--resume)", self.reused);
        }
        s += "\n";
        s
    }

    /// calibration.md.
    pub fn markdown(&self) -> String {
        let mut s = format!("# Calibration of `{}`\n\n", self.preset);
        s += &format!(
            "Data: {}. {} case(s) used, {} skipped. Objective: trust-weighted mean |ln(sim/measured)|, \
             Nelder–Mead. Preset config hash {}.{}\n\n",
            self.data_files.join(", "),
            self.cases.len(),
            self.skipped.len(),
            self.preset_hash,
            self.sampled.as_ref().map_or(String::new(), |o| format!(
                " Long kernels sampled (`--sample {o}`, validated against full detail in tests/sampling.rs)."
            ))
        );
        s += "## Parameters\n\n| parameter | preset | fitted | bounds | bounds from |\n|---|---|---|---|---|\n";
        for r in self.param_rows() {
            s += &format!("| {} |\n", r.join(" | "));
        }
        s += "\n## Errors\n\n| | MAPE | weighted \\|ln(sim/meas)\\| |\n|---|---|---|\n";
        for r in self.error_rows() {
            s += &format!("| {} |\n", r.join(" | "));
        }
        if let Some(cv) = &self.cv {
            s += "\n## Out-of-fold predictions\n\nEvery case predicted once, by the fit of the fold that held it out \
                  (pooled over the folds, so these MAPEs can differ from the mean of the folds' validation MAPEs).\n\n\
                  | kind | cases | MAPE | max \\|error\\| |\n|---|---|---|---|\n";
            for (kind, n, mape, max) in &cv.by_kind {
                s += &format!("| {kind} | {n} | {} | {} |\n", pct(*mape), pct(*max));
            }
            s += "\n| case | kind | fold | measured | predicted | error |\n|---|---|---|---|---|---|\n";
            for o in &cv.out_of_fold {
                let (p, e) = match o.predicted {
                    Some(p) => (num(p), format!("{:+.1}%", 100.0 * (p - o.measured) / o.measured)),
                    None => ("failed".into(), "–".into()),
                };
                s += &format!("| {} | {} | {} | {} | {p} | {e} |\n", o.id, o.kind, o.fold, num(o.measured));
            }
            s +=
                "\n## Folds\n\n| fold | held out | fitted | training MAPE | validation MAPE |\n|---|---|---|---|---|\n";
            for (i, f) in cv.folds.iter().enumerate() {
                let vals: Vec<String> = self.params.iter().zip(&f.values).map(|(p, v)| p.show(*v)).collect();
                s += &format!(
                    "| {} | {} | {} | {} | {} |\n",
                    i + 1,
                    f.held_out.join(", "),
                    vals.join(", "),
                    pct(f.train.mape),
                    pct(f.validation.mape)
                );
            }
        }
        s += "\n## Cases\n\n| case | kind | measured | before | after |\n|---|---|---|---|---|\n";
        for c in &self.cases {
            let o = |v: Option<f64>| v.map_or("failed".into(), num);
            s += &format!("| {} | {} | {} | {} | {} |\n", c.id, c.kind, num(c.measured), o(c.before), o(c.after));
        }
        if !self.skipped.is_empty() {
            s += "\n## Skipped\n\n| case | reason |\n|---|---|\n";
            for (id, why) in &self.skipped {
                s += &format!("| {id} | {} |\n", why.replace('|', "\\|"));
            }
        }
        s
    }

    /// The calibrated config: inherits the preset, sets the fitted parameters, each with its
    /// provenance (no date, so the file is reproducible).
    pub fn config_toml(&self) -> String {
        let ids: Vec<&str> = self.cases.iter().map(|c| c.id.as_str()).collect();
        let cv = match &self.cv {
            Some(cv) => format!("{}-fold CV validation MAPE {}", cv.k, pct(cv.validation_mape)),
            None => "no CV".into(),
        };
        let cv = match &self.sampled {
            Some(o) => format!("{cv}, sampled --sample {o}"),
            None => cv,
        };
        let mut s = format!(
            "# Calibrated by `gpusim calibrate` from preset {} (config hash {}).\n\
             # Data: {}.\n# Cases ({}): {}.\n\
             # Objective: trust-weighted mean |ln(sim/measured)|: {:.4} before, {:.4} after; MAPE {} -> {}; {}.\n",
            self.preset,
            self.preset_hash,
            self.data_files.join(", "),
            ids.len(),
            ids.join(", "),
            self.before.wlog,
            self.after.wlog,
            pct(self.before.mape),
            pct(self.after.mape),
            cv,
        );
        let parent = load_preset(&self.preset).map(|a| a.description).unwrap_or_default();
        s += &format!(
            "inherits = {}\nname = {}\ndescription = {}\n",
            toml::Value::String(self.preset.clone()),
            toml::Value::String(format!("{}{CALIBRATED_SUFFIX}", self.preset)),
            toml::Value::String(format!("{parent}; calibrated by gpusim calibrate ({cv})"))
        );
        let mut section = String::new();
        for (p, v) in self.params.iter().zip(&self.fitted) {
            let (table, leaf) = p.key.rsplit_once('.').unwrap_or(("", &p.key));
            if table != section {
                s += &format!("\n[{table}]\n");
                section = table.to_string();
            }
            s += &format!(
                "{leaf} = {} # fitted (preset {}, bounds [{}, {}]) on {} case(s) of {}; {}\n",
                p.toml_value(*v),
                p.show(p.preset_value),
                bound(p.lo),
                bound(p.hi),
                ids.len(),
                self.data_files.join(", "),
                cv
            );
        }
        s
    }
}

impl Transfer {
    /// A Markdown section: parameters carried, errors before/after, per case.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "## Carried to `{}` (fitted on `{}`)

",
            self.target, self.from
        );
        s += "| parameter | target's preset | carried |\n|---|---|---|\n";
        for (p, v) in self.params.iter().zip(&self.values) {
            s += &format!("| {} | {} | {} |\n", p.key, p.show(p.preset_value), p.show(*v));
        }
        s += &format!(
            "\n{} case(s): MAPE {} with the target's own values, {} with the carried ones \
             (weighted |ln(sim/meas)| {:.4} → {:.4}).\n\n",
            self.cases.len(),
            pct(self.before.mape),
            pct(self.after.mape),
            self.before.wlog,
            self.after.wlog
        );
        s += "| case | kind | measured | target's values | carried values |\n|---|---|---|---|---|\n";
        for c in &self.cases {
            let o = |v: Option<f64>| v.map_or("failed".into(), num);
            s += &format!("| {} | {} | {} | {} | {} |\n", c.id, c.kind, num(c.measured), o(c.before), o(c.after));
        }
        for (id, why) in &self.skipped {
            s += &format!("\nskipped {id}: {}", why.replace('|', "\\|"));
        }
        s + "\n"
    }

    /// Plain text for the terminal.
    pub fn text(&self) -> String {
        format!(
            "carried to {}: {} case(s), MAPE {} with its own values, {} with {}'s fit\n",
            self.target,
            self.cases.len(),
            pct(self.before.mape),
            pct(self.after.mape),
            self.from
        )
    }
}
