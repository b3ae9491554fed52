#!/usr/bin/env bash
# Regenerates the tables of docs/accuracy.md: runs `gpusim correlate` on the reference data
# (built-in presets and calibrated presets) and replaces each block between
# `<!-- generated: NAME -->` and `<!-- end: NAME -->` with the run's correlation.md (its headings
# one level down). Also copies the scatter plots to docs/accuracy/. About 5 minutes on 2 cores.
#
#   bash scripts/update-accuracy.sh [path/to/gpusim]
set -euo pipefail
cd "$(dirname "$0")/.."
gpusim="${1:-./target/release/gpusim}"
ref="${GPUSIM_REFERENCE_DIR:-../shared/reference}"
out="$(mktemp -d)"
run() { # NAME ARCH KINDS
  "${gpusim}" correlate --arch "$2" --kind "$3" -q --report "${out}/$1" \
    --data "${ref}/published.toml" --data "${ref}/measured-h200.toml"
}
run gemm-auto auto gemm
run gemm-calibrated calibrated gemm
run memory-auto auto memory
run memory-calibrated calibrated memory
mkdir -p docs/accuracy
for r in gemm-auto gemm-calibrated memory-auto memory-calibrated; do
  cp "${out}/${r}/scatter.svg" "docs/accuracy/${r}.svg"
done
python3 - "${out}" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
doc = pathlib.Path("docs/accuracy.md")
text = doc.read_text()
for name in ["gemm-auto", "gemm-calibrated", "memory-auto", "memory-calibrated"]:
    md = (out / name / "correlation.md").read_text()
    md = re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", md, flags=re.M)
    md = md.replace("![simulated vs measured](scatter.svg)", f"![simulated vs measured](accuracy/{name}.svg)")
    block = f"<!-- generated: {name} (scripts/update-accuracy.sh; do not edit by hand) -->\n{md.strip()}\n<!-- end: {name} -->"
    pat = re.compile(rf"<!-- generated: {re.escape(name)} .*?<!-- end: {re.escape(name)} -->", re.S)
    if not pat.search(text):
        sys.exit(f"docs/accuracy.md has no block for {name}")
    text = pat.sub(lambda _: block, text)
doc.write_text(text)
PY
rm -rf "${out}"
echo "docs/accuracy.md updated"
