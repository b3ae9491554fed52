#!/usr/bin/env bash
# Renders gpusim's HTML reports in a real headless Chromium and fails on a console error, a
# script that did not run, or a blank page: the study report of tests/fixtures/study-small and
# a `gpusim run --report` page. Installs Debian's `chromium` when it is missing.
#   scripts/test-html.sh                        check both pages
#   scripts/test-html.sh --study out/next-gen   also check that study directory's report
#   scripts/test-html.sh --screenshot [--study DIR]
#                                               also write docs/img/report.png (the README's
#                                               picture: DIR's report when given, else the fixture's)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

screenshot=false
study_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --screenshot) screenshot=true ;;
    --study) study_dir="$2"; shift ;;
    *) echo "usage: $0 [--screenshot] [--study DIR]" >&2; exit 2 ;;
  esac
  shift
done

cargo build --quiet
gpusim=./target/debug/gpusim
out="$(mktemp -d "${TMPDIR:-/tmp}/gpusim-html.XXXXXX")"
trap 'rm -rf "${out}"' EXIT

"${gpusim}" report tests/fixtures/study-small -o "${out}/study.html" --quiet
"${gpusim}" run --quiet --arch h100-sxm5-80gb examples/ffma_bound.trace --report "${out}/run.html"
pages=(study run)
if [ -n "${study_dir}" ]; then
  "${gpusim}" report "${study_dir}" -o "${out}/given.html" --quiet
  pages+=(given)
fi

chrome() {
  # --no-sandbox: CI runs as root in a container; the pages are our own files.
  chromium --headless --no-sandbox --disable-gpu --no-first-run --enable-logging=stderr --v=0 \
    --virtual-time-budget=5000 "$@"
}

status=0
for page in "${pages[@]}"; do
  echo "== chromium: ${page}.html"
  chrome --dump-dom "file://${out}/${page}.html" >"${out}/${page}.dom" 2>"${out}/${page}.log" || {
    echo "chromium failed on ${page}.html:"; cat "${out}/${page}.log"; status=1; continue; }
  if grep -E "Uncaught|ERROR:CONSOLE|CONSOLE\(.*error" "${out}/${page}.log"; then
    echo "FAIL: console errors on ${page}.html"; status=1
  fi
  tables=$(grep -o '<table class="sortable">' "${out}/${page}.dom" | wc -l)
  svgs=$(grep -o '<svg' "${out}/${page}.dom" | wc -l)
  echo "   ${tables} sortable tables, ${svgs} SVG figures"
  if ! grep -q 'data-script="ran"' "${out}/${page}.dom"; then
    echo "FAIL: the page's script did not run on ${page}.html"; status=1
  fi
  if [ "${tables}" -lt 1 ] || [ "${svgs}" -lt 1 ]; then
    echo "FAIL: ${page}.html rendered without its tables or figures (blank page?)"; status=1
  fi
done

if [ "${screenshot}" = true ]; then
  shot=study
  [ -z "${study_dir}" ] || shot=given
  chrome --hide-scrollbars --window-size=1100,1400 --screenshot="${out}/report.png" "file://${out}/${shot}.html" 2>/dev/null
  # Keep the README's picture small: 8-bit palette when ImageMagick or pngquant is present.
  if command -v pngquant >/dev/null 2>&1; then
    pngquant --force --output docs/img/report.png 64 "${out}/report.png"
  else
    cp "${out}/report.png" docs/img/report.png
  fi
  echo "wrote docs/img/report.png ($(stat -c %s docs/img/report.png) bytes)"
fi
exit "${status}"
