#!/bin/bash
# The CPU and memory of vramwarden beside nvidia-smi's own loops, on a machine with an NVIDIA
# GPU, all at 1 Hz and side by side in one run (docs/benchmarks.md, "The agent"):
#   nvidia-smi --query-gpu=<8 fields> -l 1          (the device loop)
#   nvidia-smi --query-compute-apps=pid,used_memory -l 1   (the process loop)
#   vramwarden agent          (sampling, session log, rules, leak watch, HTTP front idle)
#   vramwarden record         (the same engine, no HTTP front)
#   vramwarden -v agent       (a second agent: its run statistics give the per-part breakdown;
#                              the scrapes are made on it, after the measured window)
# Each one's CPU comes from /proc/PID/task/*/schedstat over the measured window, after a
# warm-up; RSS from /proc/PID/status at its end. Needs bash, awk, python3 and nvidia-smi; no
# network, no Rust. Every process is started under `timeout` and stopped at the end.
#
# From the repository root:
#   VRAMWARDEN=path/to/vramwarden OUT=/tmp/perf tests/workloads/perf_side_by_side.sh
# Environment (defaults in brackets):
#   VRAMWARDEN  the release binary [target/release/vramwarden]
#   OUT         where report.txt and the logs go [/tmp/perf-side-by-side]
#   WARMUP      seconds before the window [20]
#   MEASURE     seconds measured [150] (not SECONDS: bash keeps its own)
#   JOBS        GPU jobs started first, with WORKLOADS set [3]
#   WORKLOADS   a folder holding gpu_workload.py (../shared/workloads); unset: no jobs
#   PYTHON      the Python with PyTorch for the jobs [python3]
#   SCRAPES     /metrics scrapes timed after the window [50]
#   SMI_FIELDS  the device loop's fields
#               [memory.used,memory.reserved,memory.free,memory.total,utilization.gpu,
#                temperature.gpu,power.draw,clocks.sm]
#   PORT        the agents listen on PORT and PORT+1 of 127.0.0.1 [18726]
#   VW_FLAGS    more flags for every vramwarden, e.g. --demo to try the script without a GPU
#               (then nvidia-smi is left out where it is missing)
#   BASELINE    another vramwarden binary (an older build): its agent runs in the same window as
#               `agent-base` on PORT+2, so two builds are compared on the same host at once
set -u
B=${VRAMWARDEN:-target/release/vramwarden}
OUT=${OUT:-/tmp/perf-side-by-side}
WARMUP=${WARMUP:-20}
MEASURE=${MEASURE:-150}
JOBS=${JOBS:-3}
WORKLOADS=${WORKLOADS:-}
PY=${PYTHON:-python3}
SCRAPES=${SCRAPES:-50}
SMI_FIELDS=${SMI_FIELDS:-memory.used,memory.reserved,memory.free,memory.total,utilization.gpu,temperature.gpu,power.draw,clocks.sm}
PORT=${PORT:-18726}
mkdir -p "$OUT" || exit 1
B=$(readlink -f "$B")
[ -x "$B" ] || { echo "no vramwarden binary at $B (set VRAMWARDEN)" >&2; exit 1; }
VW_FLAGS=${VW_FLAGS:-}
SMI=$(command -v nvidia-smi)
[ -n "$SMI" ] || [ -n "$VW_FLAGS" ] || { echo "nvidia-smi not found" >&2; exit 1; }
TMP=$(mktemp -d /tmp/vw-perf.XXXXXX)
R=$OUT/report.txt; : > "$R"
LIMIT=$((WARMUP + MEASURE + SCRAPES / 5 + 120))   # no process outlives the run by much
say() { echo "$*" | tee -a "$R"; }

declare -a NAMES=() PIDS=() WRAPS=() JOBPIDS=()
declare -A IDX=()
cleanup() {
  for p in "${WRAPS[@]}" "${JOBPIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The process `timeout` ($1) started, once it has.
child_of() {
  local t=$1 i stat
  for i in $(seq 50); do
    for stat in /proc/[0-9]*/stat; do
      # Field 4 (after the parenthesised name) is the parent's pid.
      awk -v t="$t" '{sub(/^.*\) /, ""); if ($2 == t) {split(FILENAME, f, "/"); print f[3]; exit}}' \
        "$stat" 2>/dev/null
    done | head -1 | grep . && return 0
    sleep 0.1
  done
  return 1
}
# start NAME CMD...: runs CMD under timeout, stdout and stderr to $OUT/NAME.log.
start() {
  local name=$1; shift
  timeout -s TERM -k 10 "$LIMIT" "$@" > "$OUT/$name.log" 2>&1 &
  local w=$! p
  p=$(child_of "$w") || { echo "$name did not start" >&2; exit 1; }
  IDX[$name]=${#PIDS[@]}; NAMES+=("$name"); PIDS+=("$p"); WRAPS+=("$w")
}
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
rss_mb() { awk '/^VmRSS:/ {printf "%.1f", $2 * 1024 / 1e6}' /proc/"$1"/status 2>/dev/null; }
threads() { # per thread name: CPU ns
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ < "$t/comm" 2>/dev/null)" "$(awk '{print $1}' "$t/schedstat" 2>/dev/null)"
  done | awk 'NF == 2 {s[$1] += $2} END {for (n in s) print n, s[n]}' | sort
}
wait_ready() { # PORT: /healthz answers within 60 s
  local i
  for i in $(seq 120); do
    python3 - "$1" <<'EOF' 2>/dev/null && return 0
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=2).read()
EOF
    sleep 0.5
  done
  return 1
}

say "# vramwarden beside nvidia-smi, $(date -u +%FT%TZ)"
say "vramwarden: $("$B" --version 2>&1)"
say "host: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
[ -n "$SMI" ] && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$R"
[ -n "$VW_FLAGS" ] && say "vramwarden flags: $VW_FLAGS"
say "1 Hz; warm-up ${WARMUP} s, measured ${MEASURE} s"

# GPU jobs first, so every monitor sees them from its start.
if [ -n "$WORKLOADS" ] && [ "$JOBS" -gt 0 ]; then
  patterns=(busy idle sawtooth plateau)
  for i in $(seq 0 $((JOBS - 1))); do
    pat=${patterns[$((i % 4))]}
    timeout -s TERM -k 10 "$LIMIT" "$PY" "$WORKLOADS/gpu_workload.py" "$pat" --gib 1 \
      --seconds $((LIMIT - 30)) > "$OUT/job$i.log" 2>&1 &
    JOBPIDS+=($!)
  done
  # Until each job holds its memory (CUDA starts in a few seconds), 90 s at most.
  for i in $(seq 180); do
    n=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)
    [ "$n" -ge "$JOBS" ] && break
    sleep 0.5
  done
  say "jobs: $JOBS (gpu_workload.py: ${patterns[*]} in turn, 1 GiB each); $n listed by nvidia-smi"
else
  say "jobs: none (set WORKLOADS=folder of gpu_workload.py for real jobs)"
fi

export XDG_CONFIG_HOME=$TMP/cfg
mkdir -p "$TMP/cfg" "$TMP/a" "$TMP/v" "$TMP/r"
if [ -n "$SMI" ]; then
  start smi-gpu nvidia-smi --query-gpu="$SMI_FIELDS" --format=csv -l 1
  start smi-apps nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 1
fi
# shellcheck disable=SC2086 # VW_FLAGS is a list of flags
VRAMWARDEN_DATA_DIR=$TMP/a start agent "$B" $VW_FLAGS --config "$TMP/a/none.toml" agent \
  --listen "127.0.0.1:$PORT" --token-file "$TMP/a/token"
# shellcheck disable=SC2086
VRAMWARDEN_DATA_DIR=$TMP/r start record "$B" $VW_FLAGS --config "$TMP/r/none.toml" record --out "$TMP/r/run.vwlog"
# shellcheck disable=SC2086
VRAMWARDEN_DATA_DIR=$TMP/v start agent-v "$B" $VW_FLAGS -v --config "$TMP/v/none.toml" agent \
  --listen "127.0.0.1:$((PORT + 1))" --token-file "$TMP/v/token"
if [ -n "${BASELINE:-}" ]; then
  BASE=$(readlink -f "$BASELINE")
  [ -x "$BASE" ] || { say "no baseline binary at $BASELINE"; exit 1; }
  say "baseline: $("$BASE" --version 2>&1)"
  mkdir -p "$TMP/b"
  # shellcheck disable=SC2086
  VRAMWARDEN_DATA_DIR=$TMP/b start agent-base "$BASE" $VW_FLAGS --config "$TMP/b/none.toml" agent \
    --listen "127.0.0.1:$((PORT + 2))" --token-file "$TMP/b/token"
  wait_ready $((PORT + 2)) || { say "the baseline agent did not answer /healthz"; exit 1; }
fi
wait_ready "$PORT" || { say "the agent did not answer /healthz"; exit 1; }
wait_ready $((PORT + 1)) || { say "the -v agent did not answer /healthz"; exit 1; }

sleep "$WARMUP"
declare -a C0=() T0=()
for i in "${!PIDS[@]}"; do C0[$i]=$(cpu_ns "${PIDS[$i]}"); T0[$i]=$(threads "${PIDS[$i]}"); done
AV=${PIDS[${IDX[agent-v]}]}
kill -USR1 "$AV"   # the -v agent's statistics count from here
t0=$(date +%s.%N)
sleep "$MEASURE"
declare -a C1=() T1=() RSS=()
declare -A US=()
for i in "${!PIDS[@]}"; do
  C1[$i]=$(cpu_ns "${PIDS[$i]}"); T1[$i]=$(threads "${PIDS[$i]}"); RSS[$i]=$(rss_mb "${PIDS[$i]}")
done
t1=$(date +%s.%N)
kill -USR1 "$AV"   # and end here
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')

say ""
say "## CPU over ${wall} s (µs of CPU per second, from schedstat) and RSS at the end"
printf '%-10s %12s %9s  %s\n' process "µs CPU/s" "RSS MB" command | tee -a "$R"
for i in "${!PIDS[@]}"; do
  us=$(awk -v a="${C0[$i]}" -v b="${C1[$i]}" -v w="$wall" 'BEGIN {printf "%.1f", (b - a) / 1000 / w}')
  US[${NAMES[$i]}]=$us
  printf '%-10s %12s %9s  %s\n' "${NAMES[$i]}" "$us" "${RSS[$i]}" \
    "$(tr '\0' ' ' < /proc/"${PIDS[$i]}"/cmdline | cut -c1-110)" | tee -a "$R"
done
[ -n "${IDX[agent-base]:-}" ] && say "agent / the baseline's agent: $(awk -v a="${US[agent]}" -v b="${US[agent-base]}" 'BEGIN {printf "%.2f", a / b}')"
[ -n "$SMI" ] && say "agent / the process loop: $(awk -v a="${US[agent]}" -v s="${US[smi-apps]}" 'BEGIN {printf "%.2f", a / s}') (the budget: 0.5); record / the process loop: $(awk -v a="${US[record]}" -v s="${US[smi-apps]}" 'BEGIN {printf "%.2f", a / s}')"
say ""
say "## Per thread (µs/s)"
for n in agent record agent-v agent-base; do
  [ -n "${IDX[$n]:-}" ] || continue
  i=${IDX[$n]}
  join -a2 -e0 -o 0,1.2,2.2 <(echo "${T0[$i]}") <(echo "${T1[$i]}") |
    awk -v n="${NAMES[$i]}" -v w="$wall" '{printf "%-10s %-24s %10.1f\n", n, $1, ($3 - $2) / 1000 / w}' | tee -a "$R"
done

# Scrape latency on the -v agent (after the window: its CPU is in the agent's next statistics).
say ""
say "## /metrics scrape on the -v agent, $SCRAPES scrapes 0.2 s apart (wall time, a new connection each)"
if command -v curl >/dev/null; then   # curl's own time, as a Prometheus server would see it
  for _ in $(seq "$SCRAPES"); do
    timeout 10 curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "http://127.0.0.1:$((PORT + 1))/metrics"
    sleep 0.2
  done > "$TMP/scrapes"
  how=curl
else
  python3 - "$((PORT + 1))" "$SCRAPES" > "$TMP/scrapes" <<'EOF'
import sys, time, urllib.request
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    t = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    print(time.perf_counter() - t, len(body))
    time.sleep(0.2)
EOF
  how="python3 urllib"
fi
sort -g "$TMP/scrapes" | awk -v how="$how" '{t[NR] = $1 * 1000; b = $2}
  END {
    if (NR == 0) {print "no scrape answered"; exit}
    p90 = int(0.9 * NR); if (p90 < 1) p90 = 1
    printf "median %.2f ms, p90 %.2f ms, max %.2f ms, %d bytes (%s)\n", t[int((NR + 1) / 2)], t[p90], t[NR], b, how
  }' | tee -a "$R"

# What the agent showed against nvidia-smi, read at the same moment.
say ""
say "## Readings: nvidia-smi and the agent's /metrics"
[ -n "$SMI" ] && nvidia-smi --query-gpu=index,memory.used,memory.reserved,memory.total --format=csv,noheader | sed 's/^/nvidia-smi gpu: /' | tee -a "$R"
[ -n "$SMI" ] && nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/nvidia-smi process: /' | tee -a "$R"
python3 - "$PORT" <<'EOF' | tee -a "$R"
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
for line in text.splitlines():
    if line.startswith(("vramwarden_gpu_memory_used_bytes", "vramwarden_gpu_memory_reserved_bytes",
                        "vramwarden_process_gpu_memory_bytes")):
        name, value = line.rsplit(" ", 1)
        print(f"agent: {name} {float(value) / 2**20:.1f} MiB")
EOF

# Stop: the -v agent's last statistics (the scrapes) and each log.
for w in "${WRAPS[@]}"; do kill -TERM "$w" 2>/dev/null; done
for i in "${!PIDS[@]}"; do kill -TERM "${PIDS[$i]}" 2>/dev/null; done
wait "${WRAPS[@]}" 2>/dev/null
say ""
say "## The -v agent's run statistics (its own CPU by part; the clock reads are its overhead)"
# Three reports: the warm-up (SIGUSR1 at the window's start), the window (SIGUSR1 at its end),
# and the scrapes until it stopped.
sed -n 's/^.*vramwarden::host::cost: //p' "$OUT/agent-v.log" | awk '
  /^run statistics over/ {n++; if (n == 2) print "### the measured window"; if (n == 3) print "### after it: the scrapes, until exit"}
  n >= 2' | tee -a "$R"
say ""
say "Logs: $OUT/*.log; this report: $R"
