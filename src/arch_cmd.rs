//! `gpusim arch`: list, show, validate, explain and diff chip descriptions.

use std::path::PathBuf;

use clap::Subcommand;

use crate::error::CliResult;

#[derive(Subcommand)]
pub enum ArchCmd {
    /// List the built-in presets.
    List,
    /// Print a chip (preset or file) as fully resolved TOML, inheritance applied.
    Show { name: String },
    /// Check a chip TOML file; exit 2 with the first problem, naming file, line and key.
    Validate { file: PathBuf },
    /// Describe a parameter (`l2.slices`): meaning, unit, default and valid range.
    Explain { param: String },
    /// Show the parameters in which two chips differ.
    Diff { a: String, b: String },
}

pub fn arch(cmd: ArchCmd) -> CliResult {
    match cmd {
        ArchCmd::List => {
            for (name, desc) in gpusim_configs::presets() {
                println!("{name:<20} {desc}");
            }
        }
        ArchCmd::Show { name } => {
            let a = gpusim_configs::load(&name)?;
            print!("{}", gpusim_configs::to_toml(&a));
        }
        ArchCmd::Validate { file } => {
            let a = gpusim_configs::load_file(&file)?;
            println!(
                "{}: valid ({}: {} SMs at {}, {} L2, {} HBM)",
                file.display(),
                a.name,
                a.sm.count,
                a.clocks.sm,
                a.l2.size,
                a.hbm.bandwidth
            );
        }
        ArchCmd::Explain { param } => {
            let p = gpusim_configs::explain(&param)?;
            println!("{p}");
            if let Some(why) = gpusim_configs::descriptive(&p.name) {
                println!("descriptive: the timing model does not read it ({why})");
            }
        }
        ArchCmd::Diff { a, b } => {
            let x = gpusim_configs::load(&a)?;
            let y = gpusim_configs::load(&b)?;
            let d = gpusim_configs::diff(&x, &y);
            if d.is_empty() {
                println!("{a} and {b} are identical");
            }
            for p in d {
                println!("{p}");
            }
        }
    }
    Ok(())
}
