#!/bin/bash
# tools/freeze.sh CMD...: runs CMD with every niced (nice >= 5) process of the machine paused, for a
# quiet timing on a machine whose other jobs run at low priority (the timings in docs/runtime.md
# and docs/quantizer.md that say "frozen" or "under freeze.sh"). It SIGSTOPs them in three sweeps
# (to catch processes started during a sweep), then keeps sweeping every half second while CMD runs
# (a paused shell cannot start more, but a job that was between sweeps can: stop 49's `make bench`
# under a one-time freeze ran beside new niced quantizes), runs CMD at the caller's priority, then
# SIGCONTs every one it stopped, also when it is interrupted; CMD's exit status is its own. Paused
# jobs with wall-clock timeouts (test runners) may time out: keep CMD short. Frozen runs take turns
# (a lock in /tmp): the timed commands run at their callers' priorities, so two freezes at once would
# each time its command beside the other's (2 cores; stop 49: ResNet-18 f32 44 then 246 ms).
exec 9> "${TMPDIR:-/tmp}/qrl-freeze.lock"
flock 9
me=$$
mygroup=$(ps -o pgid= -p $$ | tr -d ' ')
list=$(mktemp "${TMPDIR:-/tmp}/freeze-XXXXXX")
sweep() {
    local p
    # not this process group (CMD and the sweeper: they may be niced themselves)
    for p in $(ps -eo pid=,pgid=,ni= | awk -v g="$mygroup" '$3 >= 5 && $2 != g {print $1}'); do
        [ "$p" = "$me" ] && continue
        kill -STOP "$p" 2>/dev/null && echo "$p" >> "$list"
    done
}
thaw() {
    [ -n "$sweeper" ] && kill "$sweeper" 2>/dev/null && wait "$sweeper" 2>/dev/null
    sort -u "$list" | while read -r p; do kill -CONT "$p" 2>/dev/null; done
    rm -f "$list"
}
trap 'thaw; exit 130' INT TERM HUP
for s in 1 2 3; do
    sweep
    sleep 0.2
done
( trap 'exit 0' TERM; while :; do sleep 0.5; sweep; done ) 9>&- &
sweeper=$!
"$@" 9>&-
rc=$?
thaw
exit $rc
