//! Numbers and units as Nsight Compute prints them.
//!
//! ncu formats values for the locale of the machine it ran on, so a value may carry thousands
//! separators (`1,234,567.5`); only the comma separator of English locales is accepted, and a
//! comma that does not separate groups of three digits (`3,5`, a decimal comma) is an error
//! rather than a silently wrong number. Units are ncu's spellings (`nsecond`, `usecond`,
//! `msecond`, `second` and the short `ns`/`us`/`ms`/`s`; `hz`/`khz`/`mhz`/`ghz` and
//! `cycle/second`, `cycle/msecond`, `cycle/usecond`, `cycle/nsecond`; `cycle`), compared
//! without regard to case. An empty unit means the metric's base unit (ncu's
//! `--print-units base`): nanoseconds, cycles per second, cycles.

/// Whether a value is ncu's "not available" (`n/a`) or empty: the metric was not collected.
pub fn is_absent(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || t.eq_ignore_ascii_case("n/a")
}

/// Parses a number: optional sign, digits with optional `,` thousands separators, optional
/// fraction, optional exponent (`4.0e-05`). The result is finite.
pub fn parse_number(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty value where a number is expected".into());
    }
    if let Some(bad) = t.chars().find(|c| !(c.is_ascii_digit() || matches!(c, ',' | '.' | 'e' | 'E' | '+' | '-'))) {
        return Err(format!("`{t}` is not a number (unexpected `{bad}`)"));
    }
    let mantissa_end = t.find(['e', 'E']).unwrap_or(t.len());
    let (mantissa, exponent) = t.split_at(mantissa_end);
    if exponent.contains(',') {
        return Err(format!("`{t}` is not a number (a `,` in the exponent)"));
    }
    if mantissa.contains(',') {
        let unsigned = mantissa.trim_start_matches(['+', '-']);
        let int_part = unsigned.split('.').next().unwrap_or("");
        let frac_part = &unsigned[int_part.len()..];
        let groups: Vec<&str> = int_part.split(',').collect();
        let grouped = !groups[0].is_empty()
            && groups[0].len() <= 3
            && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit()))
            && groups[1..].iter().all(|g| g.len() == 3)
            && !frac_part.contains(',');
        if !grouped {
            return Err(format!(
                "`{t}` is not a number: `,` only separates thousands (1,234.5); a decimal comma is not accepted"
            ));
        }
    }
    let plain: String = t.chars().filter(|&c| c != ',').collect();
    let v: f64 = plain.parse().map_err(|_| format!("`{t}` is not a number"))?;
    if !v.is_finite() {
        return Err(format!("`{t}` is not a finite number"));
    }
    Ok(v)
}

fn norm_unit(unit: &str) -> String {
    unit.trim().to_ascii_lowercase().replace(['µ', 'μ'], "u")
}

/// How to turn a value into the target unit: multiply or divide by an exact power of ten (one
/// correctly rounded operation, so 1234500 ns is exactly 1234.5 µs).
#[derive(Clone, Copy)]
enum Scale {
    Mul(f64),
    Div(f64),
}

impl Scale {
    fn apply(self, v: f64) -> f64 {
        match self {
            Scale::Mul(f) => v * f,
            Scale::Div(f) => v / f,
        }
    }
}

/// A duration in `unit` as microseconds.
pub fn time_to_us(value: f64, unit: &str) -> Result<f64, String> {
    let scale = match norm_unit(unit).as_str() {
        "" | "ns" | "nsec" | "nsecond" | "nseconds" | "nanosecond" | "nanoseconds" => Scale::Div(1e3),
        "us" | "usec" | "usecond" | "useconds" | "microsecond" | "microseconds" => Scale::Mul(1.0),
        "ms" | "msec" | "msecond" | "mseconds" | "millisecond" | "milliseconds" => Scale::Mul(1e3),
        "s" | "sec" | "second" | "seconds" => Scale::Mul(1e6),
        _ => {
            return Err(format!(
                "unknown time unit `{}` (known: nsecond, usecond, msecond, second, ns, us, ms, s)",
                unit.trim()
            ));
        }
    };
    Ok(scale.apply(value))
}

/// A frequency in `unit` as MHz.
pub fn frequency_to_mhz(value: f64, unit: &str) -> Result<f64, String> {
    let scale = match norm_unit(unit).as_str() {
        "" | "hz" | "cycle/second" | "cycle/s" | "cycles/second" | "1/second" | "1/s" => Scale::Div(1e6),
        "khz" | "cycle/msecond" | "cycle/ms" | "cycles/msecond" => Scale::Div(1e3),
        "mhz" | "cycle/usecond" | "cycle/us" | "cycles/usecond" => Scale::Mul(1.0),
        "ghz" | "cycle/nsecond" | "cycle/ns" | "cycles/nsecond" => Scale::Mul(1e3),
        _ => {
            return Err(format!(
                "unknown frequency unit `{}` (known: hz, khz, mhz, ghz, cycle/second, cycle/msecond, cycle/usecond, cycle/nsecond)",
                unit.trim()
            ));
        }
    };
    Ok(scale.apply(value))
}

/// A cycle count in `unit` as cycles.
pub fn to_cycles(value: f64, unit: &str) -> Result<f64, String> {
    let scale = match norm_unit(unit).as_str() {
        "" | "cycle" | "cycles" => Scale::Mul(1.0),
        "kcycle" | "kcycles" => Scale::Mul(1e3),
        "mcycle" | "mcycles" => Scale::Mul(1e6),
        "gcycle" | "gcycles" => Scale::Mul(1e9),
        _ => return Err(format!("unknown cycle unit `{}` (known: cycle, Kcycle, Mcycle, Gcycle)", unit.trim())),
    };
    Ok(scale.apply(value))
}

/// A launch dimension as ncu writes it: `(132, 1, 1)` (also without parentheses or with fewer
/// than three components, the missing ones 1). Every component is a positive integer.
pub fn parse_dim3(s: &str) -> Result<[u32; 3], String> {
    let t = s.trim();
    let inner = t.strip_prefix('(').and_then(|r| r.strip_suffix(')')).unwrap_or(t);
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{t}` is not a launch dimension like (132, 1, 1)"));
    }
    let mut d = [1u32; 3];
    for (slot, p) in d.iter_mut().zip(&parts) {
        *slot = p.parse::<u32>().ok().filter(|&v| v > 0).ok_or_else(|| {
            format!("`{t}` is not a launch dimension like (132, 1, 1): `{p}` is not a positive integer")
        })?;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_separators_and_exponents() {
        assert_eq!(parse_number("1,234.5"), Ok(1234.5));
        assert_eq!(parse_number("1,234,567"), Ok(1234567.0));
        assert_eq!(parse_number(" 42 "), Ok(42.0));
        assert_eq!(parse_number("4.0e-05"), Ok(4.0e-5));
        assert_eq!(parse_number("-0.5"), Ok(-0.5));
        assert_eq!(parse_number("123,456.25"), Ok(123456.25));
        for bad in ["", "3,5", "1,23", "12,3456", ",123", "1,234.5,6", "abc", "1.2.3", "1e400", "12 MB", "1,2e3"] {
            assert!(parse_number(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_number("3,5").unwrap_err().contains("decimal comma"));
        assert!(is_absent("n/a") && is_absent(" N/A ") && is_absent("") && !is_absent("0"));
    }

    #[test]
    fn units_convert_exactly() {
        assert_eq!(time_to_us(1_234_500.0, "nsecond"), Ok(1234.5));
        assert_eq!(time_to_us(1_234_500.0, ""), Ok(1234.5));
        assert_eq!(time_to_us(1234.5, "usecond"), Ok(1234.5));
        assert_eq!(time_to_us(1234.5, "us"), Ok(1234.5));
        assert_eq!(time_to_us(1234.5, "µs"), Ok(1234.5));
        assert_eq!(time_to_us(1.2345, "msecond"), Ok(1.2345 * 1e3));
        assert_eq!(time_to_us(2.0, "ms"), Ok(2000.0));
        assert_eq!(time_to_us(4.0e-5, "second"), Ok(40.0));
        assert!(time_to_us(1.0, "fortnight").unwrap_err().contains("fortnight"));

        assert_eq!(frequency_to_mhz(1.755, "cycle/nsecond"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1.755, "Ghz"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1755.0, "Mhz"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1755.0, "cycle/usecond"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1_755_000.0, "khz"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1_755_000_000.0, "hz"), Ok(1755.0));
        assert_eq!(frequency_to_mhz(1_755_000_000.0, "cycle/second"), Ok(1755.0));
        assert!(frequency_to_mhz(1.0, "rpm").unwrap_err().contains("rpm"));

        assert_eq!(to_cycles(12.0, "cycle"), Ok(12.0));
        assert_eq!(to_cycles(1.5, "Mcycle"), Ok(1.5e6));
        assert!(to_cycles(1.0, "byte").is_err());
    }

    #[test]
    fn launch_dimensions() {
        assert_eq!(parse_dim3("(132, 1, 1)"), Ok([132, 1, 1]));
        assert_eq!(parse_dim3("(9,32,1)"), Ok([9, 32, 1]));
        assert_eq!(parse_dim3("256"), Ok([256, 1, 1]));
        for bad in ["(0, 1, 1)", "(1, 2, 3, 4)", "(a, 1, 1)", "()", "(1,,1)", "(-1, 1, 1)"] {
            assert!(parse_dim3(bad).is_err(), "{bad:?} parsed");
        }
    }
}
