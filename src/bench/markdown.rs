//! The benchmark table as Markdown, and its rewrite between two marker comments of a document
//! (`gpusim bench --markdown docs/performance.md`): the prose around the markers is kept byte
//! for byte.

use super::child::Figures;

pub const BEGIN: &str = "<!-- bench:begin -->";
pub const END: &str = "<!-- bench:end -->";

/// One row: case name, chip, what it is, figures.
pub struct Row {
    pub name: String,
    pub arch: String,
    pub what: String,
    pub figures: Figures,
}

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / (1024.0 * 1024.0))
}

/// The table (with a line naming the build and the repeats above it).
pub fn table(rows: &[Row], note: &str) -> String {
    use crate::print::thousands;
    let mut s = format!("{note}\n\n");
    s.push_str(
        "| case | chip | trace | warp insts | sim cycles | host s | warp inst/s | sim cycles/s | peak RSS MiB |\n",
    );
    s.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let f = &r.figures;
        let secs = f.seconds.max(1e-9);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} | {} |\n",
            r.name,
            r.arch,
            r.what,
            thousands(f.warp_instructions),
            thousands(f.cycles),
            f.seconds,
            thousands((f.warp_instructions as f64 / secs) as u64),
            thousands((f.cycles as f64 / secs) as u64),
            mib(f.peak_rss)
        ));
    }
    s
}

/// `doc` with the text between [`BEGIN`] and [`END`] replaced by `table`. An error when the
/// markers are missing or out of order.
pub fn rewrite(doc: &str, table: &str) -> Result<String, String> {
    let b = doc.find(BEGIN).ok_or_else(|| format!("no `{BEGIN}` marker"))?;
    let after = b + BEGIN.len();
    let e = doc[after..].find(END).ok_or_else(|| format!("no `{END}` marker after `{BEGIN}`"))? + after;
    Ok(format!("{}\n{}{}", &doc[..after], table, &doc[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_the_prose_and_replaces_the_table() {
        let doc = format!("intro\n{BEGIN}\nold table\n{END}\noutro\n");
        let out = rewrite(&doc, "new\n").unwrap();
        assert_eq!(out, format!("intro\n{BEGIN}\nnew\n{END}\noutro\n"));
        assert_eq!(rewrite(&out, "new\n").unwrap(), out, "rewriting is idempotent");
        assert!(rewrite("no markers", "x").is_err());
        assert!(rewrite(&format!("{END} {BEGIN}"), "x").is_err());
    }
}
