#!/usr/bin/env bash
# The long cargo-fuzz campaign (docs/testing.md): each named target (default: all five) runs
# RUNS executions (default 10 M) from its committed seeds (fuzz/seeds/<target>/) and its working
# corpus (fuzz/corpus/<target>/, not committed), with libFuzzer watching for hangs (-timeout, per
# input) and memory (-rss_limit_mb). Each target's final libFuzzer line goes to
# fuzz/campaign.log; a crash stops that target and leaves the input in fuzz/artifacts/<target>/.
#
# cargo-fuzz needs nightly compiler flags (-Z...). On a machine with only a stable toolchain,
# RUSTC_BOOTSTRAP=1 lets stable rustc accept them; the sanitizer is off (`-s none`: gpusim's
# crates' only unsafe code is two libc calls in the command line and sim-core's prefetch hint,
# which reads no memory), debug assertions on
# (`-a`: integer overflow panics, as in a debug build).
#
#   bash scripts/fuzz-campaign.sh                      # all targets, 10 M runs each
#   RUNS=100000 bash scripts/fuzz-campaign.sh text_reader
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
export RUSTC_BOOTSTRAP=1
runs="${RUNS:-10000000}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(text_reader binary_reader accelsim_reader arch_config study_file)
cargo fuzz build -a -s none
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  start=$(date +%s)
  status=ok
  cargo fuzz run -a -s none "$t" "corpus/$t" "seeds/$t" -- \
    -runs="${runs}" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"/tmp/fuzz-$t.log" 2>&1 || status=FAILED
  line=$(grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs' "/tmp/fuzz-$t.log" | tail -2 | tr '\n' ' ')
  echo "$(date -u +%FT%TZ) $t ${status} in $(( $(date +%s) - start )) s: ${line}" | tee -a campaign.log
  if [ "${status}" != ok ]; then
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "/tmp/fuzz-$t.log" | head -5
  fi
done
