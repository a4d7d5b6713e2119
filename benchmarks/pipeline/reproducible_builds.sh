#!/bin/bash
# Reproducible builds (issue 45, item 4): two fresh builds of the demo input into two data roots, then a third
# killed with SIGKILL (the whole process group, LLM servers included) once synthesis has had N LLM requests
# answered and resumed with the same command; every table compared in every column (behaviour_diff.py
# --every-column) between the two fresh builds and between the first and the resumed one.
#
#   benchmarks/pipeline/reproducible_builds.sh WORK_DIR [embedded|fake] [KILL_AFTER_REQUESTS]
#
# embedded: the default llama.cpp servers (about 6-10 min a build on 2 cores); fake: tests/support/fake_server.py in mode
# ok (every reply a minimal schema instance, about 3 min a build; killed 5 s into synthesis). Needs .venv (make setup).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:?work dir}
LLM=${2:-embedded}
KILL_AFTER=${3:-40}
export HF_HUB_OFFLINE=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$WORK"
[ -d "$WORK/in" ] || .venv/bin/earmark corpus "$WORK/in" --per-domain 2 --seed 0 >/dev/null
ARGS=(--no-progress)
if [ "$LLM" = fake ]; then
  PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  .venv/bin/python tests/support/fake_server.py --port "$PORT" --mode ok >"$WORK/fake.log" 2>&1 &
  FAKE=$!
  trap 'kill $FAKE 2>/dev/null || true' EXIT
  sleep 3
  ARGS+=(--llm-endpoint "http://127.0.0.1:$PORT/v1" --llm-model fake --llm-schema-mode json_schema)
fi
build() {  # build ROOT LOG
  local t0=$SECONDS
  .venv/bin/earmark build "$WORK/in" -d repro --data-root "$1" "${ARGS[@]}" >"$2" 2>&1
  echo "$(basename "$1"): $((SECONDS - t0)) s"
}
rm -rf "$WORK/a" "$WORK/b" "$WORK/k"
build "$WORK/a" "$WORK/a.log"
build "$WORK/b" "$WORK/b.log"
# the killed build: its own process group, so the LLM servers die with it
setsid .venv/bin/earmark build "$WORK/in" -d repro --data-root "$WORK/k" "${ARGS[@]}" >"$WORK/k1.log" 2>&1 &
PID=$!
n=0
for _ in $(seq 1 3600); do
  if [ "$LLM" = fake ]; then
    grep -q "Beginning subflow run 'synthesize" "$WORK/k1.log" 2>/dev/null && { sleep 5; n=$KILL_AFTER; }
  else
    n=$(cat "$WORK"/k/repro/llm-server*.log 2>/dev/null | grep -c "POST /v1/chat/completions" || true)
  fi
  [ "${n:-0}" -ge "$KILL_AFTER" ] && break
  kill -0 $PID 2>/dev/null || break
  sleep 1
done
echo "killed after ${n:-0} LLM requests of synthesis"
kill -9 -- -$PID 2>/dev/null || true
sleep 2
build "$WORK/k" "$WORK/k2.log"
echo "== fresh build a against fresh build b"
.venv/bin/python benchmarks/pipeline/behaviour_diff.py "$WORK/a/repro" "$WORK/b/repro" --every-column --show 10 | tail -n 25
echo "== fresh build a against the killed and resumed build"
.venv/bin/python benchmarks/pipeline/behaviour_diff.py "$WORK/a/repro" "$WORK/k/repro" --every-column --show 10 | tail -n 25
