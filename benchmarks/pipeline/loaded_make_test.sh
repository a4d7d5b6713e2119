#!/usr/bin/env bash
# `make test` on a fresh clone while `make demo` runs beside it, again and again, on the same cores (issue [2/4]).
#
#   benchmarks/pipeline/loaded_make_test.sh RUN_DIR [REPO]
#
# Clones REPO (default: this repository's HEAD) twice under RUN_DIR: test/ runs `make test` once; demo/ runs
# `make demo` in a loop (its data removed between rounds, so every round builds from scratch) until the tests end;
# the round still running then is stopped (SIGTERM), not waited for.
# Writes RUN_DIR/summary.txt: the commit, the test run's wall time and exit status, pytest's last line, the number
# of tests collected, the demo rounds finished, and the 1-minute load average sampled every 30 s.
set -uo pipefail
run=${1:?usage: loaded_make_test.sh RUN_DIR [REPO]}
repo=${2:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
rm -rf "$run" && mkdir -p "$run"
git clone -q "$repo" "$run/test" && git clone -q "$repo" "$run/demo"
commit=$(git -C "$run/test" rev-parse --short HEAD)
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 run

setsid bash -c '
    cd "$run/demo" || exit 1
    round=0
    while [ ! -e "$run/tests.done" ]; do
        round=$((round + 1))
        rm -rf data
        start=$(date +%s)
        if make demo >"$run/demo-$round.log" 2>&1; then status=ok; else status="exit $?"; fi
        echo "demo round $round: $status after $(( $(date +%s) - start )) s" >>"$run/demo-rounds.txt"
    done' &
demo_pid=$!

(   # the load average every 30 s
    while [ ! -e "$run/tests.done" ]; do cut -d' ' -f1 /proc/loadavg >>"$run/load.txt"; sleep 30; done
) &

start=$(date +%s)
(cd "$run/test" && make test) >"$run/test.log" 2>&1
rc=$?
wall=$(( $(date +%s) - start ))
touch "$run/tests.done"
kill -TERM -- -"$demo_pid" 2>/dev/null
rounds=$(ls "$run"/demo-*.log 2>/dev/null | wc -l)
[ "$(wc -l <"$run/demo-rounds.txt" 2>/dev/null || echo 0)" -lt "$rounds" ] &&
    echo "demo round $rounds: stopped when the tests ended" >>"$run/demo-rounds.txt"
collected=$(cd "$run/test" && .venv/bin/python -m pytest --collect-only -q 2>/dev/null | tail -1)
wait "$demo_pid" 2>/dev/null
{
    echo "commit: $commit"
    echo "make test: exit $rc in $wall s (setup included)"
    echo "pytest: $(grep -E '(passed|failed|error)' "$run/test.log" | tail -1)"
    echo "collected: $collected"
    echo "demo rounds beside it:"; sed 's/^/  /' "$run/demo-rounds.txt"
    echo "1-minute load, every 30 s: min $(sort -n "$run/load.txt" | head -1), median $(sort -n "$run/load.txt" | \
        awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'), max $(sort -n "$run/load.txt" | tail -1)"
} >"$run/summary.txt"
cat "$run/summary.txt"
exit $rc
