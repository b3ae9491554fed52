//! `gpusim measure`: run the measurement harness on this machine's GPU and write the cases
//! (validation/src/measure/, schema in validation/src/measurement.rs).

use std::path::{Path, PathBuf};

use clap::Args;
use gpusim_validation::measure::{self, MeasureError, Options, Suite};

use crate::error::{CliError, CliResult};

#[derive(Args)]
pub struct MeasureArgs {
    /// quick (a few minutes on an H100/H200) or full (sweeps, more GEMM shapes).
    #[arg(long, default_value = "quick")]
    pub suite: String,
    /// Output file (default: measurements/<gpu>-<date>.toml).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Only these groups (chase, stream, l2, smem, mma, wgmma, gemm, gemm-fp8, twins); repeatable
    /// or comma-separated.
    #[arg(long)]
    pub only: Vec<String>,
}

/// Exit code 2 for what keeps this build or machine from measuring at all, 1 for a failure on a
/// working GPU.
fn cli_error(e: MeasureError) -> CliError {
    let code = if e.is_setup() { 2 } else { 1 };
    CliError { message: format!("measure: {e}"), code }
}

/// `nvidia-h200` from "NVIDIA H200".
fn slug(name: &str) -> String {
    let s: String =
        name.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let parts: Vec<&str> = s.split('-').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() { "gpu".into() } else { parts.join("-") }
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn write(path: &Path, text: &str) -> CliResult {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
    }
    std::fs::write(path, text).map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))
}

pub fn measure_cmd(a: MeasureArgs) -> CliResult {
    let suite = Suite::parse(&a.suite).map_err(|e| CliError::input(format!("--suite: {e}")))?;
    let only: Vec<String> =
        a.only.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    let opts = Options { suite, device: a.device, only, version: env!("CARGO_PKG_VERSION").to_string() };
    let outcome = measure::run(&opts, &mut |line| eprintln!("{line}")).map_err(cli_error)?;
    let m = &outcome.measurements;
    let name = m.device.as_ref().map_or("gpu", |d| d.name.as_str());
    let path = a.output.unwrap_or_else(|| PathBuf::from(format!("measurements/{}-{}.toml", slug(name), today())));
    if m.cases.is_empty() {
        let why: Vec<String> = outcome.failures.iter().map(|(g, e)| format!("{g}: {e}")).collect();
        return Err(CliError { message: format!("measure: nothing was measured ({})", why.join("; ")), code: 1 });
    }
    write(&path, &m.to_toml(&outcome.header))?;
    println!("wrote {} ({} cases)", path.display(), m.cases.len());
    let failed: Vec<String> = outcome
        .failures
        .iter()
        .filter(|(_, e)| !matches!(e, MeasureError::Unsupported(_)))
        .map(|(g, e)| format!("{g}: {e}"))
        .collect();
    for (g, e) in outcome.failures.iter().filter(|(_, e)| matches!(e, MeasureError::Unsupported(_))) {
        eprintln!("skipped {g}: {e}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError {
            message: format!(
                "measure: {} group(s) failed (the others are in {}): {}",
                failed.len(),
                path.display(),
                failed.join("; ")
            ),
            code: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(slug("NVIDIA A100-SXM4-80GB"), "nvidia-a100-sxm4-80gb");
        assert_eq!(slug("  "), "gpu");
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }
}
