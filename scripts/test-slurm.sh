#!/usr/bin/env bash
# A sweep on a real Slurm cluster: starts munge, slurmctld and slurmd on this machine (a
# one-node cluster, everything under a scratch folder, no systemd), submits the job array that
# `gpusim sweep --emit-slurm` writes for a small study, waits for it, merges the shards and checks
# that the merge equals an unsharded run byte for byte (manifest.json, results.csv and every
# point file). The daemons are stopped on exit, whatever happens.
#
#   bash scripts/test-slurm.sh [path/to/gpusim]      # default: target/debug/gpusim
#
# Needs Debian's `slurmctld slurmd slurm-client munge` (installed here when missing and root).
# Facts it relies on: ../shared/notes/slurm-local.md. Takes about 10 s after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
gpusim="$(realpath "${1:-target/debug/gpusim}")"
[[ -x "${gpusim}" ]] || { echo "test-slurm: no gpusim binary at ${gpusim} (cargo build first)" >&2; exit 2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
  || ! command -v munged >/dev/null; then
  echo "== installing slurmctld slurmd slurm-client munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/gpusim-slurm.XXXXXX")"
pids=()
stop() {
  # slurmd, then slurmctld, then munged (the reverse of starting); a hard kill after 5 s.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -9 "${pids[i]}" 2>/dev/null || true
  done
  if [[ "${KEEP_SCRATCH:-}" == 1 ]]; then echo "scratch kept: ${scratch}"; else rm -rf "${scratch}"; fi
}
trap stop EXIT

host="$(hostname -s)"
mkdir -p "${scratch}"/{munge,state,spool,log,run}
chmod 700 "${scratch}/munge"
# Ports away from the defaults (6817/6818), so a cluster the machine may run is not disturbed.
ctld_port="${GPUSIM_SLURMCTLD_PORT:-16817}"
slurmd_port="${GPUSIM_SLURMD_PORT:-16818}"

echo "== munge"
mungekey --create --keyfile="${scratch}/munge/munge.key"
munged -F --force --socket="${scratch}/munge/munge.socket" --pid-file="${scratch}/munge/munged.pid" \
  --key-file="${scratch}/munge/munge.key" --log-file="${scratch}/log/munged.log" \
  --seed-file="${scratch}/munge/munge.seed" >"${scratch}/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -S "${scratch}/munge/munge.socket" ]] && break; sleep 0.1; done
[[ -S "${scratch}/munge/munge.socket" ]] || { echo "munged did not start:"; cat "${scratch}/log/munged.log"; exit 1; }

export SLURM_CONF="${scratch}/slurm.conf"
cat >"${SLURM_CONF}" <<EOF
ClusterName=gpusim-test
SlurmctldHost=${host}
SlurmUser=root
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${scratch}/munge/munge.socket
StateSaveLocation=${scratch}/state
SlurmdSpoolDir=${scratch}/spool
SlurmctldPidFile=${scratch}/run/slurmctld.pid
SlurmdPidFile=${scratch}/run/slurmd.pid
SlurmctldLogFile=${scratch}/log/slurmctld.log
SlurmdLogFile=${scratch}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MailProg=/bin/true
NodeName=${host} CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

echo "== slurmctld, slurmd"
slurmctld -D -f "${SLURM_CONF}" >"${scratch}/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "${SLURM_CONF}" >"${scratch}/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
  state="$(sinfo -h -o %T 2>/dev/null || true)"
  [[ "${state}" == idle* ]] && break
  sleep 0.1
done
[[ "${state:-}" == idle* ]] || { echo "the node did not come up (state: ${state:-none})"; tail -20 "${scratch}"/log/*.log; exit 1; }

echo "== the study, its job array, the merge"
study="${scratch}/study.toml"
cat >"${study}" <<EOF
name = "slurm-test"
arch = "h100-sxm5-80gb"
[vary]
"sm.count" = [64, 80, 96, 112, 132]  # 8-CTA clusters need 8 SMs per GPC
"hbm.bandwidth" = '"2 TB/s".."3 TB/s":2'
[[workload]]
trace = "${root}/examples/two_streams.trace"
[[workload]]
generator = "stream-read"
params = { bytes_per_array = "1 MiB" }
EOF
shards=4
"${gpusim}" sweep "${study}" --emit-slurm --shards "${shards}" -o "${scratch}/study" >"${scratch}/job.sbatch"
job="$(sbatch --parsable "${scratch}/job.sbatch")"
job="${job%%;*}"
echo "submitted job array ${job} (${shards} tasks)"
for _ in $(seq 1200); do
  [[ -z "$(squeue -h -j "${job}" 2>/dev/null)" ]] && break
  sleep 0.1
done
[[ -z "$(squeue -h -j "${job}" 2>/dev/null)" ]] || { echo "the job did not finish in 120 s"; squeue; exit 1; }
shard_dirs=()
for ((i = 0; i < shards; i++)); do
  [[ -f "${scratch}/study/shard-${i}/manifest.json" ]] || {
    echo "task ${i} left no results; its log:"; cat "${scratch}"/study/slurm-*_"${i}".out 2>/dev/null || true; exit 1; }
  shard_dirs+=("${scratch}/study/shard-${i}")
done
"${gpusim}" sweep merge "${shard_dirs[@]}" -o "${scratch}/study/merged"
"${gpusim}" sweep "${study}" -q -o "${scratch}/whole"
diff -r "${scratch}/whole" "${scratch}/study/merged"
rows="$(($(wc -l <"${scratch}/whole/results.csv") - 1))"
[[ "${rows}" == 20 ]] || { echo "expected 20 results, got ${rows}"; exit 1; }
echo "slurm: ${shards}-task job array merged equals the unsharded run (${rows} results): 1 passed, 0 failed"
