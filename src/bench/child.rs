//! Each benchmark case runs in a child process of the same binary (`gpusim bench --child ...`),
//! so its peak resident set is its own: the parent reaps the child with `wait4`, whose
//! `ru_maxrss` is that one process's high-water mark (Linux: KiB).

use std::io::Read;
use std::process::{Command, Stdio};

use crate::error::{CliError, CliResult};

/// What the child prints, on one line after this tag.
pub const TAG: &str = "gpusim-bench-result";

/// One case's measured figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub warp_instructions: u64,
    pub cycles: u64,
    /// Best host seconds over the repeats.
    pub seconds: f64,
    /// Peak resident set of the child, bytes.
    pub peak_rss: u64,
}

/// The line the child prints.
pub fn result_line(warp_instructions: u64, cycles: u64, seconds: f64) -> String {
    format!("{TAG} {warp_instructions} {cycles} {seconds:e}")
}

/// Runs `gpusim bench --child <args>` and returns its figures with its peak RSS.
pub fn run(args: &[String]) -> CliResult<Figures> {
    let exe = std::env::current_exe().map_err(|e| CliError::input(format!("cannot find the gpusim binary: {e}")))?;
    let mut child = Command::new(exe)
        .arg("bench")
        .arg("--child")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| CliError::input(format!("cannot start a benchmark child: {e}")))?;
    let mut out = String::new();
    let read = child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    let (status, peak_rss) = reap(&mut child)?;
    if let Some(Err(e)) = read {
        return Err(CliError::input(format!("benchmark child: cannot read its output: {e}")));
    }
    if !status {
        return Err(CliError::input(format!("benchmark child `{}` failed", args.join(" "))));
    }
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(TAG))
        .ok_or_else(|| CliError::input(format!("benchmark child `{}` printed no result line", args.join(" "))))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || CliError::input(format!("benchmark child: malformed result `{line}`"));
    if f.len() != 3 {
        return Err(bad());
    }
    Ok(Figures {
        warp_instructions: f[0].parse().map_err(|_| bad())?,
        cycles: f[1].parse().map_err(|_| bad())?,
        seconds: f[2].parse().map_err(|_| bad())?,
        peak_rss,
    })
}

/// Waits for the child; whether it succeeded, and its peak RSS in bytes.
#[cfg(target_os = "linux")]
fn reap(child: &mut std::process::Child) -> CliResult<(bool, u64)> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child; the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(CliError::input(format!("waiting for a benchmark child: {e}")));
        }
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok((ok, usage.ru_maxrss.max(0) as u64 * 1024))
}

/// Elsewhere peak RSS is not measured (reported as 0).
#[cfg(not(target_os = "linux"))]
fn reap(child: &mut std::process::Child) -> CliResult<(bool, u64)> {
    let s = child.wait().map_err(|e| CliError::input(format!("waiting for a benchmark child: {e}")))?;
    Ok((s.success(), 0))
}
