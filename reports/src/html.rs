//! A [`Document`] as one self-contained HTML file: inline CSS, inline SVG figures, and a few
//! lines of inline JavaScript that sort a table by a clicked column. Nothing is fetched from a
//! network or a file. Deterministic: the same document gives the same bytes.
//!
//! The page marks what a test can check: every table is `<table class="sortable">`, every
//! figure a `<figure>` holding an `<svg>`; the contents link each section by `#s<index>`.

use std::fmt::Write;

use crate::doc::{Block, Cell, Document, Table};

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{margin-bottom:.2em}.sub{color:#666;margin-top:0}h2{border-bottom:1px solid #ccc;padding-top:.5em}\
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}th,td{border:1px solid #ddd;padding:3px 8px}\
th{background:#f3f3f3;cursor:pointer;user-select:none}th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}\
td.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#fafafa}\
dl{display:grid;grid-template-columns:max-content auto;gap:2px 1em}dt{font-weight:bold}dd{margin:0;font-family:monospace}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em}\
.note{background:#fff7d6;border-left:4px solid #e6a800;padding:.4em .8em}nav ul{columns:2}";

/// Sorts a table by the clicked header: numbers by `data-v`, text otherwise; a second click
/// reverses. Written without any library. Last, it marks `<body data-script="ran">`, which a
/// headless browser's DOM shows only when the script ran without an error.
const SCRIPT: &str = "document.querySelectorAll('table.sortable').forEach(function(t){\
var hs=t.querySelectorAll('th');hs.forEach(function(h,i){h.addEventListener('click',function(){\
var asc=!h.classList.contains('asc');hs.forEach(function(x){x.classList.remove('asc','desc')});\
h.classList.add(asc?'asc':'desc');var b=t.tBodies[0];var rs=Array.prototype.slice.call(b.rows);\
rs.sort(function(a,c){var x=a.cells[i],y=c.cells[i];var u=x.getAttribute('data-v'),v=y.getAttribute('data-v');\
var r=(u!==null&&v!==null)?(parseFloat(u)-parseFloat(v)):x.textContent.localeCompare(y.textContent);\
return asc?r:-r});rs.forEach(function(r){b.appendChild(r)})})})});\
document.body.setAttribute('data-script','ran');";

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn table(out: &mut String, t: &Table) {
    out.push_str("<table class=\"sortable\"><thead><tr>");
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            match c {
                Cell::Text(s) => {
                    let _ = write!(out, "<td>{}</td>", escape(s));
                }
                // A value JavaScript cannot parse back (NaN, inf) sorts as text.
                Cell::Number { value, text } if value.is_finite() => {
                    let _ = write!(out, "<td class=\"n\" data-v=\"{value:e}\">{}</td>", escape(text));
                }
                Cell::Number { text, .. } => {
                    let _ = write!(out, "<td class=\"n\">{}</td>", escape(text));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// The SVG element of a figure, without an XML declaration if it has one.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// The document as an HTML page.
pub fn render(d: &Document) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&d.title),
        escape(&d.title)
    );
    if !d.subtitle.is_empty() {
        let _ = writeln!(out, "<p class=\"sub\">{}</p>", escape(&d.subtitle));
    }
    if d.sections.len() > 1 {
        out.push_str("<nav><ul>");
        for (i, s) in d.sections.iter().enumerate() {
            let _ = write!(out, "<li><a href=\"#s{i}\">{}</a></li>", escape(&s.heading));
        }
        out.push_str("</ul></nav>\n");
    }
    for (i, s) in d.sections.iter().enumerate() {
        let _ = writeln!(out, "<section id=\"s{i}\"><h2>{}</h2>", escape(&s.heading));
        for b in &s.blocks {
            match b {
                Block::Subheading(t) => {
                    let _ = writeln!(out, "<h3>{}</h3>", escape(t));
                }
                Block::Paragraph(t) => {
                    let _ = writeln!(out, "<p>{}</p>", escape(t));
                }
                Block::Note(t) => {
                    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(t));
                }
                Block::KeyValues(kv) => {
                    out.push_str("<dl>");
                    for (k, v) in kv {
                        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
                    }
                    out.push_str("</dl>\n");
                }
                Block::Table(t) => table(&mut out, t),
                Block::Figure(f) => {
                    let _ = writeln!(
                        out,
                        "<figure>{}<figcaption>{}</figcaption></figure>",
                        inline_svg(&f.svg),
                        escape(&f.caption)
                    );
                }
            }
        }
        out.push_str("</section>\n");
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}
