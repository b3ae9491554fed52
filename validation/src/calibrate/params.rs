//! The parameters a calibration fits: which keys, their kinds, preset values and bounds, and
//! how a candidate's values are set on the preset.

use gpusim_configs::{Arch, ParamKind, explain};
use serde::Serialize;

use super::{CalError, err};

/// Default parameters when GEMM cases are selected.
pub const DEFAULT_FIT_GEMM: &[&str] = &["sim.kernel_launch_latency", "tensor.wgmma_base_latency"];
/// Default parameters when only latency/bandwidth cases are selected.
pub const DEFAULT_FIT_MEMORY: &[&str] = &["l1.hit_latency", "l2.hit_latency", "hbm.latency"];

/// How a parameter's value is written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ValueKind {
    /// `"N cycles"`, whole.
    Cycles,
    /// `"X ns"`, whole picoseconds.
    Nanos,
    /// A bare integer.
    Int,
    /// A bare float.
    Float,
    /// `"X unit"`.
    Unit(String),
}

/// A parameter to fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalParam {
    pub key: String,
    pub kind: ValueKind,
    pub preset_value: f64,
    pub lo: f64,
    pub hi: f64,
    /// Where the bounds come from.
    pub bounds_from: String,
}

impl CalParam {
    /// Rounds a value as the config stores it.
    pub fn round(&self, v: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        match self.kind {
            ValueKind::Cycles | ValueKind::Int => v.round(),
            // Three decimals, as a config would be written (and so the fit's grid).
            ValueKind::Nanos | ValueKind::Unit(_) => (v * 1000.0).round() / 1000.0,
            ValueKind::Float => v,
        }
    }

    /// The TOML value.
    pub fn toml_value(&self, v: f64) -> toml::Value {
        match &self.kind {
            ValueKind::Cycles => toml::Value::String(format!("{} cycles", v.round() as i64)),
            ValueKind::Nanos => toml::Value::String(format!("{} ns", (v * 1000.0).round() / 1000.0)),
            ValueKind::Int => toml::Value::Integer(v.round() as i64),
            ValueKind::Float => toml::Value::Float(v),
            ValueKind::Unit(u) => toml::Value::String(format!("{} {u}", (v * 1000.0).round() / 1000.0)),
        }
    }

    /// For people: `300 cycles`, `219.5 ns`, `8`.
    pub fn show(&self, v: f64) -> String {
        match self.toml_value(v) {
            toml::Value::String(s) => s,
            other => other.to_string(),
        }
    }

    pub(super) fn normalise(&self, v: f64) -> f64 {
        if self.hi > self.lo { ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0) } else { 0.0 }
    }

    pub(super) fn denormalise(&self, x: f64) -> f64 {
        self.round(self.lo + x.clamp(0.0, 1.0) * (self.hi - self.lo))
    }
}

/// Whether a datasheet fixes the parameter (`unit` from the schema).
pub fn is_datasheet(key: &str, unit: &str) -> bool {
    key.starts_with("clocks.")
        || key.starts_with("tensor.flops_per_clk_per_sm")
        || matches!(key, "sm.count" | "hbm.bandwidth")
        || unit == "bytes"
        || key.ends_with(".size")
}

/// Resolves `keys` against the preset `base`: value kind (from the schema's typed kind), preset
/// value, bounds (the schema's declared `min`/`max`). Datasheet parameters are refused unless
/// `allow_datasheet`.
pub fn resolve_params(base: &Arch, keys: &[String], allow_datasheet: bool) -> Result<Vec<CalParam>, CalError> {
    let mut out: Vec<CalParam> = Vec::new();
    for key in keys {
        if out.iter().any(|p| &p.key == key) {
            continue;
        }
        let info = explain(key).map_err(|e| CalError { message: e.to_string(), interrupted: false })?;
        if is_datasheet(key, info.unit) && !allow_datasheet {
            return err(format!(
                "`{key}` is fixed by the datasheet (SM count, clocks, peak rates, bandwidths, sizes are inputs, \
                 not fitted); pass --allow-datasheet to fit it anyway"
            ));
        }
        let Some(v) = base.value(key) else {
            return err(format!("`{key}` has no numeric value in the preset"));
        };
        // Durations are fitted in ns (the schema's base unit is the picosecond).
        let (kind, scale) = match info.kind {
            ParamKind::Cycles => (ValueKind::Cycles, 1.0),
            ParamKind::Time => (ValueKind::Nanos, 1e3),
            ParamKind::Integer => (ValueKind::Int, 1.0),
            ParamKind::Float => (ValueKind::Float, 1.0),
            ParamKind::BytesPerCycle => (ValueKind::Unit("B/clk".into()), 1.0),
            ParamKind::Bytes => (ValueKind::Unit("B".into()), 1.0),
            ParamKind::Hertz => (ValueKind::Unit("Hz".into()), 1.0),
            ParamKind::BytesPerSec => (ValueKind::Unit("B/s".into()), 1.0),
            other => return err(format!("`{key}` ({other:?}) is not a number")),
        };
        let value = v / scale;
        let (rlo, rhi) = (info.min.map(|m| m / scale), info.max.map(|m| m / scale));
        let lo = rlo.unwrap_or(0.0);
        // The schema's maximum is a plausibility limit (what the model can allocate or wait
        // for), not a search range: the search goes up to 4× the preset at most.
        let search_hi = if value > 0.0 { 4.0 * value } else { 20000.0 };
        let hi = rhi.map_or(search_hi, |h| h.min(search_hi)).max(lo);
        let upper = if value > 0.0 { "4× preset" } else { "20000 (preset 0)" };
        let bounds_from = match (&info.range, rhi) {
            (Some(r), Some(h)) if h <= search_hi => format!("schema range {r}"),
            (Some(r), _) => format!("schema range {r}; upper {upper}"),
            _ => format!("[0, {upper}]"),
        };
        out.push(CalParam { key: key.clone(), kind, preset_value: value, lo, hi, bounds_from });
    }
    Ok(out)
}

/// `base` with `values` set for `params` (each written as [`CalParam::toml_value`] writes it,
/// so rounded as a config file would hold it), through [`Arch::with_overrides`].
pub fn apply_values(base: &Arch, params: &[CalParam], values: &[f64]) -> Result<Arch, String> {
    let overrides: Vec<(&str, toml::Value)> =
        params.iter().zip(values).map(|(p, v)| (p.key.as_str(), p.toml_value(*v))).collect();
    base.with_overrides(&overrides).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusim_configs::load_preset;

    #[test]
    fn params_get_kinds_values_and_bounds() {
        let b = load_preset("h800-pcie").unwrap();
        let keys: Vec<String> = ["l2.hit_latency", "hbm.latency", "sm.lsu_queue_depth", "sim.kernel_launch_latency"]
            .map(String::from)
            .into();
        let p = resolve_params(&b, &keys, false).unwrap();
        assert_eq!((p[0].kind.clone(), p[0].preset_value, p[0].lo, p[0].hi), (ValueKind::Cycles, 264.0, 1.0, 1056.0));
        assert_eq!((p[1].kind.clone(), p[1].preset_value), (ValueKind::Nanos, 219.0));
        assert_eq!((p[2].kind.clone(), p[2].lo), (ValueKind::Int, 1.0));
        // 2 µs from the H100 preset, in ns; the schema maximum (1 s) is far above, so the upper
        // bound is 4× that.
        assert_eq!((p[3].kind.clone(), p[3].preset_value, p[3].hi), (ValueKind::Nanos, 2000.0, 8000.0));
        assert_eq!(p[1].show(219.5), "219.5 ns");
        let arch = apply_values(&b, &p, &[300.0, 250.5, 12.0, 1000.0]).unwrap();
        assert_eq!(arch.name, load_preset("h800-pcie").unwrap().name);
        for k in ["sm.count", "clocks.sm", "hbm.bandwidth", "l2.size", "tensor.flops_per_clk_per_sm.fp8"] {
            let e = resolve_params(&b, &[k.to_string()], false).unwrap_err();
            assert!(e.message.contains("datasheet"), "{k}: {e}");
        }
        assert!(resolve_params(&b, &["l2.hit_latancy".into()], false).is_err());
        // Values with a unit read as a config would write them, not as binary fractions.
        let bw = resolve_params(&b, &["l2.slice_bandwidth".into()], false).unwrap();
        assert_eq!(bw[0].show(68.59999999999998), "68.6 B/clk");
    }
}
