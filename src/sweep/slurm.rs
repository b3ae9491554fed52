//! `gpusim sweep ... --emit-slurm --shards N`: an sbatch script for a Slurm job array of N
//! tasks, task I running `--shard I/N` into `OUT/shard-I`, then the merge to run when all are
//! done. Pure: the caller gives the command line and paths (absolute, as the nodes see them).

/// What the script runs.
pub struct Job<'a> {
    /// The study's name (the job's name).
    pub name: &'a str,
    /// Array tasks, one shard each.
    pub shards: usize,
    /// Threads per task (`--cpus-per-task`).
    pub threads: usize,
    /// Where the tasks run (`cd`), so relative paths of the command hold.
    pub workdir: &'a str,
    /// The gpusim executable.
    pub exe: &'a str,
    /// The sweep's arguments without `-o` and `--shard`, each already quoted for the shell.
    pub command: &'a [String],
    /// The study directory: shards go to `OUT/shard-I`, logs to `OUT/slurm-*.out`.
    pub out: &'a str,
    /// Extra `#SBATCH` lines.
    pub extra: &'a [String],
}

/// The sbatch script of `j`.
pub fn script(j: &Job) -> String {
    let Job { name, shards, threads, workdir, exe, command, out, extra } = *j;
    let job: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!("# gpusim sweep `{name}` as a Slurm job array: {shards} task(s), one shard each.\n"));
    s.push_str("# Submit:            sbatch THIS_FILE\n");
    s.push_str(&format!(
        "# When all are done: {} sweep merge {}/shard-* -o {}/merged\n",
        quote(exe),
        quote(out),
        quote(out)
    ));
    s.push_str(&format!("#SBATCH --job-name=gpusim-{job}\n"));
    s.push_str(&format!("#SBATCH --array=0-{}\n", shards - 1));
    s.push_str("#SBATCH --ntasks=1\n");
    s.push_str(&format!("#SBATCH --cpus-per-task={threads}\n"));
    s.push_str(&format!("#SBATCH --output={out}/slurm-%A_%a.out\n"));
    for e in extra {
        s.push_str(&format!("#SBATCH {e}\n"));
    }
    s.push_str("set -euo pipefail\n");
    s.push_str(&format!("cd {}\n", quote(workdir)));
    s.push_str("i=\"${SLURM_ARRAY_TASK_ID:?run this script with sbatch}\"\n");
    s.push_str(&format!("exec {} sweep", quote(exe)));
    for a in command {
        s.push(' ');
        s.push_str(a);
    }
    s.push_str(&format!(
        " --shard \"$i/{shards}\" --threads \"${{SLURM_CPUS_PER_TASK:-{threads}}}\" -o {}/shard-\"$i\"\n",
        quote(out)
    ));
    s
}

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_an_array_with_one_shard_per_task() {
        let cmd = vec![quote("/s/study.toml")];
        let extra = ["--partition=debug".to_string()];
        let job = Job {
            name: "next gen",
            shards: 4,
            threads: 2,
            workdir: "/w",
            exe: "/bin/gpusim",
            command: &cmd,
            out: "/o",
            extra: &extra,
        };
        let s = script(&job);
        assert!(s.starts_with("#!/bin/bash\n"));
        assert!(s.contains("#SBATCH --array=0-3\n"));
        assert!(s.contains("#SBATCH --job-name=gpusim-next_gen\n"));
        assert!(s.contains("#SBATCH --partition=debug\n"));
        assert!(s.contains("exec /bin/gpusim sweep /s/study.toml --shard \"$i/4\""));
        assert!(s.contains("-o /o/shard-\"$i\"\n"));
    }

    #[test]
    fn quoting_survives_the_shell() {
        assert_eq!(quote("sm.count=[66,132]"), "'sm.count=[66,132]'");
        assert_eq!(quote(r#"a"b"#), r#"'a"b'"#);
        assert_eq!(quote("it's"), r#"'it'\''s'"#);
        assert_eq!(quote("plain/path.toml"), "plain/path.toml");
        assert_eq!(quote(""), "''");
    }
}
