//! A study: the base chip, the workloads and the varied parameters, from a study TOML file or
//! from `--arch/--vary/--workload` flags. Pure: reading the file is the caller's; paths in a
//! file are taken relative to the file's folder (`base_dir`).
//!
//! ```toml
//! name = "next-gen"                      # default: the file's stem
//! arch = "../../configs/arch/next.toml"  # a preset name, or a chip file
//! cost = "sm.count * clocks.sm"          # optional: for the report's Pareto front
//! zip = [["l2.size", "l2.slices"]]       # optional: axes that move together
//!
//! [design]                               # optional; default: the full factorial
//! method = "latin-hypercube"             # or "factorial"
//! points = 16
//! seed = 1
//!
//! [vary]                                 # dotted chip keys, as `gpusim arch explain` names them
//! "sm.count" = [132, 146, 160]           # a list
//! "hbm.bandwidth" = '"3.35 TB/s".."8 TB/s":3'   # a range (`log:` for a log range)
//!
//! [[workload]]
//! name = "gemm-8192"                     # default: from the trace's file name or the generator
//! generator = "gemm"                     # a generator (`gpusim trace params`) ...
//! params = { m = 8192, n = 8192, k = 8192 }
//!
//! [[workload]]
//! trace = "../two_streams.trace"         # ... or a trace file
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::cost::Expr;
use super::design::{Axis, Method};
use super::spec::{self, Spec};

/// A study, checked: every key a chip parameter, every generator known, names unique.
#[derive(Clone, Debug)]
pub struct Study {
    pub name: String,
    /// Where the study came from, for messages (`examples/whatif/next-gen.toml`, `--vary`).
    pub origin: String,
    /// A preset name or a chip file's path.
    pub arch: String,
    pub workloads: Vec<Workload>,
    pub axes: Vec<Axis>,
    pub zip: Vec<Vec<String>>,
    pub method: Method,
    pub cost: Option<(String, Expr)>,
    /// Sample long kernels (`sample = "2:4:1:1"` in the file, or `--sample`): see
    /// sim_core::sample. Part of each result's key.
    pub sample: Option<gpusim_sim_core::SampleOptions>,
}

/// One workload of a study.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Unique in the study; a file name (`[A-Za-z0-9._-]`).
    pub name: String,
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Trace(PathBuf),
    Generator { generator: String, params: Vec<(String, String)> },
}

impl Workload {
    /// As the manifest's `source` shows it: the path, or `gemm m=8192 n=8192`.
    pub fn source_text(&self) -> String {
        match &self.source {
            Source::Trace(p) => p.display().to_string(),
            Source::Generator { generator, params } => {
                let mut s = generator.clone();
                for (k, v) in params {
                    s.push_str(&format!(" {k}={v}"));
                }
                s
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    arch: Spanned<String>,
    cost: Option<Spanned<String>>,
    #[serde(default)]
    zip: Vec<Vec<String>>,
    design: Option<DesignFile>,
    #[serde(default, rename = "workload")]
    workloads: Vec<Spanned<WorkloadFile>>,
    #[serde(default)]
    vary: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    sample: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DesignFile {
    method: Spanned<String>,
    points: Option<usize>,
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: Option<String>,
    trace: Option<String>,
    generator: Option<String>,
    #[serde(default)]
    params: toml::Table,
}

/// `file:line:col` of byte `pos` in `text`.
fn at(file: &str, text: &str, pos: usize) -> String {
    let before = &text[..pos.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().count() + 1;
    format!("{file}:{line}:{col}")
}

/// Parses a study file's `text`; `file` names it in errors, `base_dir` anchors its paths.
/// Generator names and parameters are checked when the workloads are built.
pub fn parse(file: &str, text: &str, base_dir: &Path) -> Result<Study, String> {
    let f: File = toml::from_str(text).map_err(|e| {
        let loc = e.span().map_or_else(|| file.to_string(), |s| at(file, text, s.start));
        format!("{loc}: {}", e.message().trim())
    })?;
    let here = |pos: usize| at(file, text, pos);
    let mut vary: Vec<_> = f.vary.into_iter().collect();
    vary.sort_by_key(|(k, _)| k.span().start);
    let mut axes = Vec::new();
    for (k, v) in vary {
        let info =
            gpusim_configs::explain(k.get_ref()).map_err(|e| format!("{}: [vary]: {e}", here(k.span().start)))?;
        let spec = spec::from_toml(v.get_ref(), info.kind)
            .map_err(|e| format!("{}: `{}`: {e}", here(v.span().start), k.get_ref()))?;
        axes.push(Axis { key: k.into_inner(), spec });
    }
    let method = match f.design {
        None => Method::Factorial,
        Some(d) => match d.method.get_ref().as_str() {
            "factorial" => {
                if d.points.is_some() || d.seed.is_some() {
                    return Err(format!(
                        "{}: `points` and `seed` are for method = \"latin-hypercube\"",
                        here(d.method.span().start)
                    ));
                }
                Method::Factorial
            }
            "latin-hypercube" => Method::LatinHypercube {
                points: d.points.ok_or_else(|| {
                    format!("{}: a latin-hypercube design needs `points`", here(d.method.span().start))
                })?,
                seed: d.seed.unwrap_or(1),
            },
            other => {
                return Err(format!(
                    "{}: unknown design method `{other}`; valid: factorial, latin-hypercube",
                    here(d.method.span().start)
                ));
            }
        },
    };
    let mut workloads = Vec::new();
    for w in f.workloads {
        let loc = here(w.span().start);
        let w = w.into_inner();
        let source = match (w.trace, w.generator) {
            (Some(t), None) if w.params.is_empty() => Source::Trace(base_dir.join(t)),
            (Some(_), None) => return Err(format!("{loc}: `params` are for a `generator`, not a `trace`")),
            (None, Some(g)) => {
                let params = w
                    .params
                    .iter()
                    .map(|(k, v)| match v {
                        toml::Value::String(s) => Ok((k.clone(), s.clone())),
                        toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                            Ok((k.clone(), v.to_string()))
                        }
                        other => Err(format!("{loc}: parameter `{k}`: `{other}` is not a value")),
                    })
                    .collect::<Result<_, _>>()?;
                Source::Generator { generator: g, params }
            }
            _ => return Err(format!("{loc}: a workload needs exactly one of `trace` and `generator`")),
        };
        workloads.push(named(w.name, source).map_err(|e| format!("{loc}: {e}"))?);
    }
    let arch_text = f.arch.get_ref();
    let arch =
        if looks_like_path(arch_text) { base_dir.join(arch_text).display().to_string() } else { arch_text.clone() };
    let cost = match f.cost {
        None => None,
        Some(c) => {
            let e = Expr::parse(c.get_ref()).map_err(|e| format!("{}: {e}", here(c.span().start)))?;
            Some((c.into_inner(), e))
        }
    };
    let name =
        f.name.unwrap_or_else(|| Path::new(file).file_stem().map_or("study".into(), |s| s.to_string_lossy().into()));
    let sample = match f.sample {
        None => None,
        Some(s) => {
            Some(crate::run::parse_sample(s.get_ref()).map_err(|e| format!("{}: sample: {e}", here(s.span().start)))?)
        }
    };
    finish(Study { name, origin: file.to_string(), arch, workloads, axes, zip: f.zip, method, cost, sample })
}

/// What the flags of `gpusim sweep --arch ... --vary ... --workload ...` give.
pub struct Flags<'a> {
    pub name: Option<&'a str>,
    pub arch: &'a str,
    pub vary: &'a [String],
    pub workloads: &'a [String],
    pub zip: &'a [String],
    pub lhs: Option<usize>,
    pub seed: u64,
    pub cost: Option<&'a str>,
}

/// A study from flags: `--vary KEY=SPEC` ([`spec::parse_cli`]), `--workload` a trace path or
/// `GENERATOR key=value ...`, `--zip KEY,KEY`. `is_generator` says whether a name is one.
pub fn from_flags(f: &Flags, is_generator: &dyn Fn(&str) -> bool) -> Result<Study, String> {
    let mut axes = Vec::new();
    for v in f.vary {
        let (k, s) = v.split_once('=').ok_or_else(|| format!("--vary `{v}`: expected KEY=SPEC"))?;
        let info = gpusim_configs::explain(k.trim()).map_err(|e| format!("--vary `{v}`: {e}"))?;
        let spec: Spec = spec::parse_cli(s, info.kind).map_err(|e| format!("--vary `{v}`: {e}"))?;
        axes.push(Axis { key: k.trim().to_string(), spec });
    }
    let mut workloads = Vec::new();
    for w in f.workloads {
        let mut words = w.split_whitespace();
        let first = words.next().ok_or("--workload: empty")?;
        let source = if is_generator(first) {
            let params = words
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .ok_or_else(|| format!("--workload `{w}`: `{kv}` is not key=value"))
                })
                .collect::<Result<_, _>>()?;
            Source::Generator { generator: first.to_string(), params }
        } else {
            Source::Trace(PathBuf::from(w))
        };
        workloads.push(named(None, source).map_err(|e| format!("--workload `{w}`: {e}"))?);
    }
    let zip = f.zip.iter().map(|z| z.split(',').map(|k| k.trim().to_string()).collect()).collect();
    let method = match f.lhs {
        Some(points) => Method::LatinHypercube { points, seed: f.seed },
        None => Method::Factorial,
    };
    let cost = f.cost.map(|c| Expr::parse(c).map(|e| (c.to_string(), e))).transpose()?;
    finish(Study {
        name: f.name.unwrap_or("sweep").to_string(),
        origin: "the command line".into(),
        arch: f.arch.to_string(),
        workloads,
        axes,
        zip,
        method,
        cost,
        sample: None,
    })
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.contains('\\') || s.ends_with(".toml")
}

/// A workload with its name (given, or from the source), checked to be a file name.
fn named(name: Option<String>, source: Source) -> Result<Workload, String> {
    let name = match name {
        Some(n) => {
            if n.is_empty() || !n.chars().all(name_char) || n.starts_with('.') {
                return Err(format!("workload name `{n}`: use letters, digits, `.`, `_` and `-` (it names a file)"));
            }
            n
        }
        None => {
            let raw = match &source {
                Source::Trace(p) => p.file_stem().map_or("trace".into(), |s| s.to_string_lossy().into_owned()),
                Source::Generator { generator, params } => {
                    let mut s = generator.clone();
                    for (k, v) in params {
                        s.push_str(&format!("-{k}{v}"));
                    }
                    s
                }
            };
            let s: String = raw.chars().map(|c| if name_char(c) { c } else { '_' }).collect();
            s.trim_start_matches('.').to_string()
        }
    };
    Ok(Workload { name, source })
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Checks what holds across the parts: unique workload names, at least one workload.
fn finish(s: Study) -> Result<Study, String> {
    if s.workloads.is_empty() {
        return Err(format!("{}: the study has no workload", s.origin));
    }
    for (i, w) in s.workloads.iter().enumerate() {
        if s.workloads[..i].iter().any(|o| o.name == w.name) {
            return Err(format!("{}: two workloads are named `{}`; give one a `name`", s.origin, w.name));
        }
    }
    if let Some((text, e)) = &s.cost {
        for k in e.keys() {
            gpusim_configs::explain(k).map_err(|err| format!("{}: cost `{text}`: {err}", s.origin))?;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STUDY: &str = r#"
name = "t"
arch = "h100-sxm5-80gb"
cost = "sm.count * clocks.sm"
zip = [["l2.size", "l2.slices"]]

[vary]
"sm.count" = [66, 132]
"l2.size" = ["50 MiB", "100 MiB"]
"l2.slices" = [80, 160]
"hbm.bandwidth" = '"2 TB/s".."3 TB/s":3'

[[workload]]
generator = "gemm"
params = { m = 256, n = 256, k = 64 }

[[workload]]
name = "two"
trace = "two_streams.trace"
"#;

    #[test]
    fn a_study_file_parses_in_file_order() {
        let s = parse("dir/t.toml", STUDY, Path::new("dir")).unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.arch, "h100-sxm5-80gb");
        let keys: Vec<&str> = s.axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["sm.count", "l2.size", "l2.slices", "hbm.bandwidth"]);
        assert_eq!(s.workloads[0].name, "gemm-k64-m256-n256");
        assert_eq!(s.workloads[0].source_text(), "gemm k=64 m=256 n=256");
        assert_eq!(s.workloads[1].source, Source::Trace(PathBuf::from("dir/two_streams.trace")));
        assert_eq!(s.method, Method::Factorial);
        let e = super::super::design::expand(&s.axes, &s.zip, &s.method).unwrap();
        assert_eq!(e.points.len(), 2 * 2 * 3);
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let bad = STUDY.replace("cost = ", "colour = \"red\"\ncost = ");
        let e = parse("t.toml", &bad, Path::new(".")).err().unwrap();
        assert!(e.starts_with("t.toml:4:1:") && e.contains("colour"), "{e}");
        let bad = STUDY.replace("\"sm.count\"", "\"sm.cuont\"");
        let e = parse("t.toml", &bad, Path::new(".")).err().unwrap();
        assert!(e.starts_with("t.toml:8:1:") && e.contains("sm.cuont") && e.contains("sm.count"), "{e}");
        let bad = STUDY.replace("params = {", "parms = {");
        let e = parse("t.toml", &bad, Path::new(".")).err().unwrap();
        assert!(e.contains("t.toml:15:") && e.contains("parms"), "{e}");
        let bad = STUDY.replace("[[workload]]\nname = \"two\"", "[[workload]]\nname = \"gemm-k64-m256-n256\"");
        assert!(parse("t.toml", &bad, Path::new(".")).err().unwrap().contains("two workloads"));
        let bad = STUDY.replace(":3'", "'");
        let e = parse("t.toml", &bad, Path::new(".")).err().unwrap();
        assert!(e.starts_with("t.toml:11:") && e.contains("number of values"), "{e}");
    }

    #[test]
    fn sampling_is_a_study_option() {
        assert_eq!(parse("t.toml", STUDY, Path::new(".")).unwrap().sample, None);
        let with = STUDY.replace("cost = ", "sample = \"2:4:1:1\"\ncost = ");
        let s = parse("t.toml", &with, Path::new(".")).unwrap();
        assert_eq!(s.sample, Some(gpusim_sim_core::SampleOptions::default()));
        let bad = STUDY.replace("cost = ", "sample = \"2:1:1\"\ncost = ");
        let e = parse("t.toml", &bad, Path::new(".")).err().unwrap();
        assert!(e.starts_with("t.toml:4:") && e.contains("sample") && e.contains("measure ≥ 2"), "{e}");
    }

    #[test]
    fn designs_and_arch_paths() {
        let lhs = STUDY.replace("[vary]", "[design]\nmethod = \"latin-hypercube\"\npoints = 5\nseed = 3\n\n[vary]");
        let s = parse("t.toml", &lhs, Path::new("d")).unwrap();
        assert_eq!(s.method, Method::LatinHypercube { points: 5, seed: 3 });
        let bad = STUDY.replace("[vary]", "[design]\nmethod = \"random\"\n\n[vary]");
        assert!(parse("t.toml", &bad, Path::new("d")).err().unwrap().contains("unknown design method"));
        let file = STUDY.replace("\"h100-sxm5-80gb\"", "\"../chips/x.toml\"");
        assert_eq!(parse("t.toml", &file, Path::new("d")).unwrap().arch, "d/../chips/x.toml");
    }

    #[test]
    fn flags_make_the_same_study() {
        let vary = ["sm.count=[66,132]".to_string(), r#"hbm.bandwidth="2 TB/s".."3 TB/s":3"#.to_string()];
        let workloads = ["gemm m=256 n=256 k=64".to_string(), "x/y.trace".to_string()];
        let f = Flags {
            name: None,
            arch: "h100-sxm5-80gb",
            vary: &vary,
            workloads: &workloads,
            zip: &[],
            lhs: None,
            seed: 1,
            cost: None,
        };
        let s = from_flags(&f, &|g| g == "gemm").unwrap();
        assert_eq!(s.axes.len(), 2);
        assert_eq!(s.workloads[0].name, "gemm-m256-n256-k64");
        assert_eq!(s.workloads[1].name, "y");
        let bad = ["sm.cuont=[1]".to_string()];
        let f = Flags { vary: &bad, ..f };
        assert!(from_flags(&f, &|_| false).err().unwrap().contains("sm.count"));
    }
}
