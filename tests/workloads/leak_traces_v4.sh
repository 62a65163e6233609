#!/bin/bash
# Leaks v4 traces (issue 38): nine jobs of tests/workloads/shapes_v4.py start at once on one GPU
# beside `vramwarden record` (real NVML, 1 s) and an nvidia-smi loop; at most ~5 minutes of wall
# time, ~50 GiB at the peak (fits an 80 GiB H100 or a 141 GiB H200).
#
#   tests/workloads/leak_traces_v4.sh VRAMWARDEN_BINARY OUT_DIR
#
# Environment: PYTHON (default /opt/torch/.venv/bin/python, else python3), GPU (default 0),
# JOB_SECONDS (default 250: each job's run; the recording lasts JOB_SECONDS + 30 s).
# Writes to OUT_DIR:
#   v4.vwlog             the session `vramwarden record` wrote (samples + its events)
#   v4-ground.jsonl      every job's own JSON lines, in time order (`start` carries pattern, leak,
#                        heldout; leaks carry `leak_starts`)
#   v4-smi-apps.csv      nvidia-smi --query-compute-apps every 1 s (for `vramwarden import nvidia-smi`)
#   v4-smi-gpu.csv       nvidia-smi --query-gpu every 1 s
#   summary.txt          GPU, driver, each job's pid, pattern and exit code, the record's exit code
#   job-*.err, record.log  stderr of each
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 VRAMWARDEN_BINARY OUT_DIR" >&2
  exit 2
fi
B=$(readlink -f "$1"); OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=python3
GPU=${GPU:-0}; SECS=${JOB_SECONDS:-250}
mkdir -p "$OUT"; OUT=$(readlink -f "$OUT")
[ -x "$B" ] || { echo "not an executable: $B" >&2; exit 2; }
# A fresh data folder and default settings: the user's own settings do not change the recording.
export VRAMWARDEN_DATA_DIR=$OUT/vw-data XDG_CONFIG_HOME=$OUT/vw-cfg VRAMWARDEN_CONFIG=$OUT/vw-cfg/none.toml
S=$OUT/summary.txt
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv > "$S" 2>&1
echo "started $(date -u +%FT%TZ), jobs ${SECS} s each on GPU $GPU, python $PY" >> "$S"

"$B" record --interval 1s --duration "$((SECS + 30))s" --out "$OUT/v4.vwlog" > "$OUT/record.log" 2>&1 &
REC=$!
nvidia-smi -i "$GPU" --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory \
  --format=csv -lms 1000 > "$OUT/v4-smi-apps.csv" 2>/dev/null &
SMA=$!
nvidia-smi -i "$GPU" --query-gpu=timestamp,index,uuid,name,memory.total,memory.used,memory.reserved,memory.free,utilization.gpu \
  --format=csv -lms 1000 > "$OUT/v4-smi-gpu.csv" 2>/dev/null &
SMG=$!
sleep 3

PATTERNS="warmup-jumps autotune graphs eval-keep pipeline-swap kv-level kv-leak driver-leak load-steps"
PIDS=()
for p in $PATTERNS; do
  CUDA_VISIBLE_DEVICES=$GPU "$PY" "$HERE/shapes_v4.py" "$p" --seconds "$SECS" \
    > "$OUT/job-$p.jsonl" 2> "$OUT/job-$p.err" &
  PIDS+=($!)
done

# Every job ends on its own after SECS; any still there 20 s later is stopped.
deadline=$(( $(date +%s) + SECS + 20 ))
for pid in "${PIDS[@]}"; do
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
  kill -0 "$pid" 2>/dev/null && kill -TERM "$pid"
done
i=0
for p in $PATTERNS; do
  wait "${PIDS[$i]}"; rc=$?
  echo "job $p pid ${PIDS[$i]} exit $rc" >> "$S"
  i=$((i + 1))
done
sleep 5
kill -TERM "$SMA" "$SMG" 2>/dev/null
# The recording stops at its duration; a stuck one is asked to stop.
deadline=$(( $(date +%s) + 40 ))
while kill -0 "$REC" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
kill -0 "$REC" 2>/dev/null && kill -TERM "$REC"
wait "$REC"; echo "record exit $?" >> "$S"
wait "$SMA" "$SMG" 2>/dev/null

cat "$OUT"/job-*.jsonl | grep '^{' | "$PY" -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
for e in sorted(lines, key=lambda e: e["t"]):
    print(json.dumps(e))
' > "$OUT/v4-ground.jsonl"
echo "ended $(date -u +%FT%TZ); ground lines $(wc -l < "$OUT/v4-ground.jsonl"), smi rows $(wc -l < "$OUT/v4-smi-apps.csv")" >> "$S"
grep -h '"event": "\(oom\|error\|cuda_error\)"' "$OUT"/job-*.jsonl >> "$S"
"$B" export "$OUT/v4.vwlog" --csv - --table events > "$OUT/v4-events.csv" 2>> "$S"
cat "$S"
