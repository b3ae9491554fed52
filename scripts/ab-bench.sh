#!/usr/bin/env bash
# Compares two gpusim binaries on one trace, side by side: both run at the same time, one per
# core, swapping cores every round, and the user CPU time of each is recorded. On a shared
# 2-core machine whose speed varies by up to 2.5x from one minute to the next, runs taken one
# after the other measure the machine, not the change; runs taken together see the same load.
# Prints the median ratio B/A over the rounds (below 1: B is faster). Needs taskset and GNU time.
#
# usage: scripts/ab-bench.sh A_BINARY B_BINARY TRACE [ARCH] [ROUNDS]
#   e.g. git stash; cargo build --release; cp target/release/gpusim /tmp/gpusim-a; git stash pop
#        cargo build --release; scripts/ab-bench.sh /tmp/gpusim-a target/release/gpusim x.trace
set -euo pipefail
a=$1 b=$2 trace=$3 arch=${4:-h100-sxm5-80gb} rounds=${5:-6}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq "$rounds"); do
  ca=$((i % 2)) cb=$(((i + 1) % 2))
  taskset -c "$ca" /usr/bin/time -f "%U" -o "$dir/a.$i" "$a" run --arch "$arch" "$trace" -q >/dev/null &
  taskset -c "$cb" /usr/bin/time -f "%U" -o "$dir/b.$i" "$b" run --arch "$arch" "$trace" -q >/dev/null &
  wait
done
python3 - "$dir" "$rounds" <<'PY'
import statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
a = [float(open(f"{d}/a.{i}").read()) for i in range(1, n + 1)]
b = [float(open(f"{d}/b.{i}").read()) for i in range(1, n + 1)]
print(f"A: min {min(a):.3f} s, median {statistics.median(a):.3f} s")
print(f"B: min {min(b):.3f} s, median {statistics.median(b):.3f} s")
print(f"B/A, median of the rounds' ratios: {statistics.median(y / x for x, y in zip(a, b)):.3f}")
PY
