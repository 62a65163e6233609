#!/bin/bash
# On a machine with an NVIDIA GPU and PyTorch, from the repository root (a release build at
# $VRAMWARDEN, ../shared/workloads/gpu_workload.py copied into $DEVRUN): real jobs, snapshot vs nvidia-smi, the agent's HTTP
# front, park/resume with checksums, a companion release. Results under $OUT.
set -u
D=${DEVRUN:-$PWD/.devrun}; B=${VRAMWARDEN:-$D/vramwarden}; PY=${PYTHON:-/opt/torch/.venv/bin/python}
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export PYTHONPATH=$PWD/packaging/python VRAMWARDEN_DATA_DIR=/tmp/vw-data XDG_CONFIG_HOME=/tmp/vw-cfg
R=$OUT/report.txt; : > $R
say() { echo "== $(date +%T.%3N) $*" | tee -a $R; }
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >> $R
$PY tests/workloads/shapes_v3.py checksum --gib 10 --every 2 --seconds 420 > /tmp/jA.log 2>&1 & A=$!
$PY -m vramwarden_torch tests/workloads/shapes_v3.py checksum --gib 10 --every 2 --seconds 420 > /tmp/jB.log 2>&1 & Bj=$!
$PY $D/gpu_workload.py cached --gib 8 --seconds 420 > /tmp/jC.log 2>&1 & C=$!
$PY -m vramwarden_torch $D/gpu_workload.py cached --gib 8 --seconds 420 > /tmp/jD.log 2>&1 & Dj=$!
say "jobs A=$A (plain) B=$Bj (companion) C=$C (cached plain) D=$Dj (cached companion)"
$B agent --listen 127.0.0.1:8726 --token-file /tmp/tok > /tmp/agent.log 2>&1 & AG=$!
sleep 30
say "snapshot vs nvidia-smi"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sort | tee -a $R
$B snapshot --format csv > $OUT/snapshot.csv 2>>$R; cut -d, -f1-8 $OUT/snapshot.csv | head -8 | tee -a $R
TOK=$(cat /tmp/tok); H="Authorization: Bearer $TOK"
for u in /metrics /api/v1/snapshot "/api/view?since=0" /api/past; do
  s=$(date +%s.%N); code=$(curl -s -o /tmp/body -w '%{http_code} %{size_download}' -H "$H" "http://127.0.0.1:8726$u"); e=$(date +%s.%N)
  say "GET $u -> $code bytes, $(python3 -c "print(round(($e-$s)*1000,2))") ms"
done
curl -s -H "$H" "http://127.0.0.1:8726/api/view?since=0" > $OUT/api_view.json
curl -s http://127.0.0.1:8726/metrics | grep -E '^(vramwarden_gpu_memory_[a-z]+_bytes|vramwarden_process_gpu_memory_bytes)' | head -8 >> $R
say "companion list"; $B torch ls --format table >> $R 2>&1
say "release D ($Dj) under companion"; $B torch release $Dj >> $R 2>&1; echo "rc=$?" >> $R
sleep 3; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sort >> $R
for p in $A $Bj; do
  say "park $p"; /usr/bin/time -f 'cpu %U+%S s wall %e s' $B park $p >> $R 2>&1; echo "rc=$?" >> $R
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sort >> $R
  grep VmRSS /proc/$p/status >> $R
  $B snapshot --format csv 2>/dev/null | awk -F, -v p=$p 'NR==1 || $4==p' | cut -c1-240 >> $R
  sleep 6
  say "resume $p"; /usr/bin/time -f 'cpu %U+%S s wall %e s' $B resume $p >> $R 2>&1; echo "rc=$?" >> $R
  sleep 8
done
say "park refusals"; $B park 1 >> $R 2>&1; echo "rc=$?" >> $R; $B park $$ >> $R 2>&1; echo "rc=$?" >> $R
say "checksums"
for f in /tmp/jA.log /tmp/jB.log; do python3 - "$f" >> $R <<'PY'
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
ch=[e for e in ev if e['event']=='check']
print(sys.argv[1], 'checks', len(ch), 'all same', all(e['same'] for e in ch), 'max gap s', round(max((b['t']-a['t'] for a,b in zip(ch,ch[1:])),default=0),1))
PY
done
kill -TERM $AG; sleep 2
cp /tmp/agent.log $OUT/agent.log; tail -5 /tmp/jD.log >> $R
kill $A $Bj $C $Dj 2>/dev/null; sleep 2
ls /tmp/vw-data/sessions 2>/dev/null | head >> $R
