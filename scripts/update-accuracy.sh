#!/usr/bin/env bash
# Regenerates the tables of docs/accuracy.md: runs `gpusim correlate` on the reference data
# (built-in presets and calibrated presets) and replaces each block between
# `<!-- generated: NAME -->` and `<!-- end: NAME -->` with the run's correlation.md (its headings
# one level down). Also copies the scatter plots to docs/accuracy/. About 35 minutes on 2 cores.
#
#   bash scripts/update-accuracy.sh [path/to/gpusim [BLOCK...]]
#
# BLOCKs (default: all): gemm-auto gemm-calibrated memory-auto memory-calibrated attention-auto
# attention-calibrated. The attention blocks run with `--sample` (validated against full detail
# in tests/sampling.rs; full detail of the 16k-token cases takes hours): about 15 minutes each.
set -euo pipefail
cd "$(dirname "$0")/.."
gpusim="${1:-./target/release/gpusim}"
shift || true
blocks=("$@")
if [ ${#blocks[@]} -eq 0 ]; then
  blocks=(gemm-auto gemm-calibrated memory-auto memory-calibrated attention-auto attention-calibrated)
fi
ref="${GPUSIM_REFERENCE_DIR:-../shared/reference}"
out="$(mktemp -d)"
run() { # NAME ARCH KINDS [EXTRA...]
  local name="$1" arch="$2" kinds="$3"
  shift 3
  "${gpusim}" correlate --arch "${arch}" --kind "${kinds}" -q --report "${out}/${name}" \
    --data "${ref}/published.toml" --data "${ref}/measured-h200.toml" "$@"
}
for b in "${blocks[@]}"; do
  case "$b" in
    gemm-auto) run "$b" auto gemm ;;
    gemm-calibrated) run "$b" calibrated gemm ;;
    memory-auto) run "$b" auto memory ;;
    memory-calibrated) run "$b" calibrated memory ;;
    attention-auto) run "$b" auto attention --sample ;;
    attention-calibrated) run "$b" calibrated attention --sample ;;
    *) echo "unknown block $b" >&2; exit 2 ;;
  esac
done
mkdir -p docs/accuracy
for r in "${blocks[@]}"; do
  cp "${out}/${r}/scatter.svg" "docs/accuracy/${r}.svg"
done
python3 - "${out}" "${blocks[@]}" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
doc = pathlib.Path("docs/accuracy.md")
text = doc.read_text()
for name in sys.argv[2:]:
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
