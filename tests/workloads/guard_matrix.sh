#!/bin/bash
# The OOM guard on a real GPU: each scenario with the guard's defaults (acting: dry run off;
# only idle_min_minutes lowered to 1 so a run fits in minutes) and, where named, without the
# guard. Sizes are shares of GPU 0's memory, so it runs on an 80 GiB H100 as on a 141 GiB H200.
# From the repository root, on a machine with an NVIDIA GPU (driver r570+), PyTorch and a
# release build:
#   VRAMWARDEN=target/release/vramwarden PYTHON=python3 tests/workloads/guard_matrix.sh [SCENARIO...]
# Scenarios: idle-torch (and idle-torch-off), idle-raw, slow (and slow-off), release (and release-off), pause,
# two, room, burst (a sawtooth beside a held job: left alone), reply (a park and resume through the API, with their final replies). SHARED_WORKLOADS names the folder of gpu_workload.py (for `release`). Results under $OUT:
# report.txt (the outcome of every job and every data check), and per scenario the agent's
# events (CSV), its /metrics guard lines and its View.
set -u
B=${VRAMWARDEN:-.devrun/vramwarden}; PY=${PYTHON:-/opt/torch/.venv/bin/python}
OUT=${OUT:-/tmp/guard-out}; mkdir -p "$OUT"; W=${WORKLOADS:-tests/workloads}
SW=${SHARED_WORKLOADS:-../shared/workloads}
R=$OUT/report.txt
TOTAL_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
say() { echo "== $(date +%T) $*" | tee -a "$R"; }
gib() { python3 -c "print(round($TOTAL_MIB/1024*$1, 1))"; }
secs() { python3 -c "print(round($1))"; }

agent_start() { # NAME on|off
  export VRAMWARDEN_DATA_DIR=/tmp/vw-data-$1; rm -rf "$VRAMWARDEN_DATA_DIR"; mkdir -p /tmp/vw-cfg
  if [ "$2" = on ]; then
    printf '[cleanup]\ndry_run = false\n[guard]\ndry_run = false\nidle_min_minutes = 1.0\n' > /tmp/vw-cfg/$1.toml
  else
    printf '[guard]\nenabled = false\n' > /tmp/vw-cfg/$1.toml
  fi
  "$B" --config /tmp/vw-cfg/$1.toml agent --listen 127.0.0.1:8726 --token-file /tmp/vw-cfg/$1.tok \
    > "$OUT/$1-agent.log" 2>&1 &
  AG=$!; sleep 3
}
agent_stop() { # NAME
  curl -s -H "Authorization: Bearer $(cat /tmp/vw-cfg/$1.tok)" "http://127.0.0.1:8726/api/view?since=0" \
    | python3 -c 'import json,sys; v=json.load(sys.stdin); print(json.dumps(v.get("guard"), indent=1))' > "$OUT/$1-guard.json"
  curl -s http://127.0.0.1:8726/metrics | grep -E '^vramwarden_guard' > "$OUT/$1-metrics.txt"
  kill -TERM $AG; wait $AG 2>/dev/null
  local log; log=$(ls "$VRAMWARDEN_DATA_DIR"/sessions/*.vwlog 2>/dev/null | head -1)
  [ -n "$log" ] && "$B" export "$log" --csv - --table events > "$OUT/$1-events.csv" 2>>"$R"
  [ -n "$log" ] && cp "$log" "$OUT/$1.vwlog"
  grep -E 'guard|park|resume|oom' "$OUT/$1-events.csv" 2>/dev/null | cut -c1-260 | tee -a "$R"
}
wait_for() { # FILE PATTERN SECONDS
  for _ in $(seq "$3"); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 1; done; return 1
}
ended() { # NAME PID LOG
  wait "$2"; local rc=$?
  local oom; oom=$(grep -c '"oom"' "$3")
  say "$1: exit $rc, oom lines $oom, last: $(tail -1 "$3" | cut -c1-160)"
}
checks() { # NAME PID LOG
  kill -USR1 "$2" 2>/dev/null; sleep 12
  say "$1 data check: $(grep '"check"' "$3" | tail -1 | cut -c1-200)"
}
resumed() { # PID SECONDS: waits until the process holds GPU memory again
  for _ in $(seq "$2"); do
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$1" && return 0; sleep 1
  done; return 1
}

idle_and_grower() { # NAME on|off IDLE_KIND(torch|raw) RATE
  local n=$1; agent_start "$n" "$2"
  local ig; ig=$(gib 0.55)
  if [ "$3" = raw ]; then
    $PY $W/rawcuda.py hold --gib "$ig" --seconds 900 > /tmp/$n-idle.log 2>&1 & I=$!
  else
    $PY $W/shapes_v3.py checksum --gib "$ig" --every 100000 --seconds 900 > /tmp/$n-idle.log 2>&1 & I=$!
  fi
  wait_for /tmp/$n-idle.log '"hold"' 120
  say "$n: idle job $I holds $ig GiB; idle for 70 s"
  sleep 70
  local gg; gg=$(gib 0.55)
  say "$n: grower to $gg GiB at $4 GiB/s"
  $PY $W/shapes_v3.py grow-to --gib "$gg" --rate-gib "$4" --hold 10 > /tmp/$n-grow.log 2>&1 & G=$!
  ended "$n grower" $G /tmp/$n-grow.log
  if [ "$2" = on ]; then resumed $I 150 && say "$n: idle job back on the GPU" || say "$n: idle job NOT back"; fi
  checks "$n idle" $I /tmp/$n-idle.log
  kill $I 2>/dev/null; wait $I 2>/dev/null
  cp /tmp/$n-*.log "$OUT/"; agent_stop "$n"
}

pause_grower() { # nothing idle: a busy job holds half the GPU and ends 60 s after the grower starts
  local n=pause; agent_start $n on
  local bg; bg=$(gib 0.5)
  $PY $W/shapes_v3.py checksum --gib "$bg" --every 3 --seconds 100 > /tmp/$n-busy.log 2>&1 & K=$!
  wait_for /tmp/$n-busy.log '"hold"' 120
  local gg; gg=$(gib 0.6)
  say "$n: busy job $K holds $bg GiB (checks every 3 s, ends soon); grower to $gg GiB at 1.5 GiB/s"
  $PY $W/shapes_v3.py grow-to --gib "$gg" --rate-gib 1.5 --hold 10 > /tmp/$n-grow.log 2>&1 & G=$!
  ended "$n busy" $K /tmp/$n-busy.log
  ended "$n grower" $G /tmp/$n-grow.log
  cp /tmp/$n-*.log "$OUT/"; agent_stop $n
}

slow_grower() { # NAME on|off: an idle PyTorch job + a grower at 0.1 GiB/s that starts with most of its memory
  local n=$1; agent_start $n $2
  local ig; ig=$(gib 0.45)
  $PY $W/shapes_v3.py checksum --gib "$ig" --every 100000 --seconds 900 > /tmp/$n-idle.log 2>&1 & I=$!
  wait_for /tmp/$n-idle.log '"hold"' 120
  say "$n: idle job $I holds $ig GiB; idle for 50 s"
  sleep 50
  local sg gg; sg=$(gib 0.42); gg=$(gib 0.58)
  say "$n: grower takes $sg GiB, then grows to $gg GiB at 0.1 GiB/s"
  $PY $W/shapes_v3.py grow-to --start-gib "$sg" --gib "$gg" --rate-gib 0.1 --hold 10 > /tmp/$n-grow.log 2>&1 & G=$!
  ended "$n grower" $G /tmp/$n-grow.log
  if [ "$2" = on ]; then resumed $I 150 && say "$n: idle job back on the GPU" || say "$n: idle job NOT back"; fi
  checks "$n idle" $I /tmp/$n-idle.log
  kill $I 2>/dev/null; wait $I 2>/dev/null
  cp /tmp/$n-*.log "$OUT/"; agent_stop $n
}

release_cache() { # NAME on|off: a PyTorch job (with the companion) keeps half the GPU cached + a grower
  local n=$1; agent_start "$n" "$2"
  local cg; cg=$(gib 0.5)
  PYTHONPATH=packaging/python $PY -m vramwarden_torch $SW/gpu_workload.py cached --gib "$cg" --seconds 100 \
    > /tmp/$n-cached.log 2>&1 & C=$!
  wait_for /tmp/$n-cached.log '"cached"' 120
  sleep 5
  local gg; gg=$(gib 0.55)
  say "$n: job $C keeps $cg GiB cached (companion on); grower to $gg GiB at 1.0 GiB/s"
  $PY $W/shapes_v3.py grow-to --gib "$gg" --rate-gib 1.0 --hold 10 > /tmp/$n-grow.log 2>&1 & G=$!
  ended "$n grower" $G /tmp/$n-grow.log
  ended "$n cached job" $C /tmp/$n-cached.log
  cp /tmp/$n-*.log "$OUT/"; agent_stop "$n"
}

burst() { # an inference-server-like sawtooth, its climbs seen first with room, then beside a large
  # held job so that each climb ends a few GiB short of full: a return to its earlier peak, not
  # growth toward full; the guard leaves it alone (before, it paused it at a climb for good).
  local n=burst; agent_start $n on
  local sg; sg=$(gib 0.2)
  $PY $SW/gpu_workload.py sawtooth --gib "$sg" --period 10 --seconds 200 > /tmp/$n-saw.log 2>&1 & S=$!
  sleep 40
  local hg; hg=$(gib 0.66)
  $PY $W/rawcuda.py hold --gib "$hg" --seconds 170 > /tmp/$n-hold.log 2>&1 & I=$!
  wait_for /tmp/$n-hold.log '"hold"' 120
  say "$n: sawtooth $S to $sg GiB every 10 s; $hg GiB held beside it by $I from $(date +%T)"
  local least=999999
  for _ in $(seq 60); do
    f=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 | head -1)
    [ "$f" -lt "$least" ] && least=$f; sleep 1
  done
  say "$n: least free memory seen in 60 s beside the held job: $least MiB"
  ended "$n sawtooth" $S /tmp/$n-saw.log
  say "$n: sawtooth cycles: $(grep -c freed /tmp/$n-saw.log)"
  kill $I 2>/dev/null; wait $I 2>/dev/null
  cp /tmp/$n-*.log "$OUT/"; agent_stop $n
}

two_growers() {
  local n=two; agent_start $n on
  local gg; gg=$(gib 0.55)
  say "$n: two growers to $gg GiB each, 1.5 and 1.2 GiB/s"
  $PY $W/shapes_v3.py grow-to --gib "$gg" --rate-gib 1.5 --hold 10 > /tmp/$n-g1.log 2>&1 & G1=$!
  $PY $W/rawcuda.py grow --gib "$gg" --rate-gib 1.2 --hold 10 > /tmp/$n-g2.log 2>&1 & G2=$!
  ended "$n grower 1 (torch)" $G1 /tmp/$n-g1.log
  ended "$n grower 2 (raw)" $G2 /tmp/$n-g2.log
  cp /tmp/$n-*.log "$OUT/"; agent_stop $n
}

room() { # a resume into a GPU another job filled: vramwarden refuses; then the driver itself
  local n=room; export VRAMWARDEN_DATA_DIR=/tmp/vw-data-$n; rm -rf "$VRAMWARDEN_DATA_DIR"
  $PY $W/rawcuda.py hold --gib 10 --seconds 600 > /tmp/$n-p.log 2>&1 & P=$!
  wait_for /tmp/$n-p.log '"hold"' 60
  say "$n: park $P (10 GiB)"; /usr/bin/time -f 'wall %e s' "$B" park $P >> "$R" 2>&1
  local fill; fill=$(python3 -c "print(round(($(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0))/1024 - 4, 1))")
  $PY $W/rawcuda.py hold --gib "$fill" --seconds 600 > /tmp/$n-f.log 2>&1 & F=$!
  wait_for /tmp/$n-f.log '"hold"' 90
  say "$n: another job $F took $fill GiB; resume $P"
  "$B" resume $P >> "$R" 2>&1; echo "rc=$?" >> "$R"
  "$B" snapshot --format csv 2>/dev/null | awk -F, -v p=$P 'NR==1 || $4==p' | cut -c1-200 >> "$R"
  say "$n: the driver without the check (restore into the full GPU)"
  $PY $W/rawcuda.py restore-oom $P > /tmp/$n-d.log 2>&1 & D=$!
  wait_for /tmp/$n-d.log waiting_for_room 30; kill $F; wait $F 2>/dev/null; kill -USR1 $D; wait $D
  cat /tmp/$n-d.log >> "$R"
  say "$n: vramwarden resume after the failed restore"; "$B" resume $P >> "$R" 2>&1; echo "rc=$?" >> "$R"
  kill -USR1 $P; sleep 3; say "$n: parked job after all this: $(tail -2 /tmp/$n-p.log | tr '\n' ' ' | cut -c1-200)"
  kill -9 $P 2>/dev/null; cp /tmp/$n-*.log "$OUT/"
}

reply() { # a park and a resume through the agent's API: "accepted", then the final reply under its id
  local n=reply; agent_start $n on; local tok; tok=$(cat /tmp/vw-cfg/$n.tok)
  $PY $W/rawcuda.py hold --gib 8 --seconds 600 > /tmp/$n-p.log 2>&1 & P=$!
  wait_for /tmp/$n-p.log '"hold"' 60; sleep 3
  local st; st=$(curl -s -H "Authorization: Bearer $tok" http://127.0.0.1:8726/api/v1/snapshot | python3 -c '
import json,sys
def walk(o):
    if isinstance(o,dict):
        if o.get("pid")=='"$P"' and isinstance(o.get("info"),dict): print(o["info"].get("start_time_ms")); sys.exit()
        for v in o.values(): walk(v)
    elif isinstance(o,list):
        for v in o: walk(v)
walk(json.load(sys.stdin))')
  for act in park resume; do
    say "$n: POST $act $P (start_time $st)"
    local a; a=$(curl -s -w ' http=%{http_code}' -H "Authorization: Bearer $tok" -d "{\"action\":\"$act\",\"pid\":$P,\"start_time\":$st}" http://127.0.0.1:8726/api/v1/command)
    say "$n: answer: $a"
    local id; id=$(echo "$a" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().rsplit(" ",1)[0])["id"])')
    for _ in $(seq 120); do
      local r; r=$(curl -s -w ' http=%{http_code}' -H "Authorization: Bearer $tok" http://127.0.0.1:8726/api/v1/command/$id)
      case "$r" in *http=202) sleep 0.5 ;; *) say "$n: final: $r"; break ;; esac
    done
    local nv; nv=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | grep -w "^$P" || echo "$P not on the GPU")
    say "$n: nvidia-smi: $nv"
  done
  checks "$n parked+resumed" $P /tmp/$n-p.log
  kill $P 2>/dev/null; wait $P 2>/dev/null; cp /tmp/$n-*.log "$OUT/"; agent_stop $n
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$R"
for s in "${@:-idle-torch idle-torch-off idle-raw slow release release-off pause two room burst}"; do
  for x in $s; do
    case $x in
      idle-torch) idle_and_grower idle-torch on torch 0.4 ;;
      idle-torch-off) idle_and_grower idle-torch-off off torch 0.4 ;;
      idle-raw) idle_and_grower idle-raw on raw 1.5 ;;
      slow) slow_grower slow on ;;
      slow-off) slow_grower slow-off off ;;
      release) release_cache release on ;;
      release-off) release_cache release-off off ;;
      pause) pause_grower ;;
      two) two_growers ;;
      room) room ;;
      burst) burst ;;
      reply) reply ;;
    esac
  done
done
