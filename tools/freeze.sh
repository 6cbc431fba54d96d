#!/bin/bash
# tools/freeze.sh CMD...: runs CMD with every niced (nice >= 5) process of the machine paused, for a
# quiet timing on a machine whose other jobs run at low priority (the timings in docs/runtime.md
# and docs/quantizer.md that say "frozen" or "under freeze.sh"). It SIGSTOPs them in three sweeps
# (to catch processes started during a sweep), runs CMD at the caller's priority, then SIGCONTs
# every one it stopped; CMD's exit status is its own. Paused jobs with wall-clock timeouts (test
# runners) may time out: keep CMD short.
me=$$
stopped=()
for sweep in 1 2 3; do
    for p in $(ps -eo pid=,ni= | awk '$2 >= 5 {print $1}'); do
        [ "$p" = "$me" ] && continue
        kill -STOP "$p" 2>/dev/null && stopped+=("$p")
    done
    sleep 0.2
done
"$@"
rc=$?
for p in "${stopped[@]}"; do kill -CONT "$p" 2>/dev/null; done
exit $rc
