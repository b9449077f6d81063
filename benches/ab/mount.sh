#!/bin/bash
# Two builds of cairn alternately: mount a snapshot of the corpus, append to 10 files,
# snapshot, unmount; each build with its own store held by its own `cairn serve`.
#   benches/ab/mount.sh AFTER_BINARY BEFORE_BINARY [CORPUS] [ROUNDS]
set -euo pipefail
A=$1 B=$2
CORPUS=${3:-$(../shared/bench/linux-corpus.sh | tail -1)}
ROUNDS=${4:-12}
W=$(mktemp -d /tmp/cairn-ab-XXXXXX)
declare -A SNAP SERVER
cleanup() { for who in A B; do kill "${SERVER[$who]:-}" 2>/dev/null || true; done; wait; rm -rf "$W"; }
trap cleanup EXIT
cp -a "$CORPUS" "$W/src"
for who in A B; do
  bin=${!who}
  SNAP[$who]=$("$bin" --store "$W/store$who" onboard "$W/src" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["snapshot"])')
  "$bin" --store "$W/store$who" worktree remove "$W/src" --json >/dev/null
  "$bin" --store "$W/store$who" serve >"$W/serve$who.log" 2>&1 &
  SERVER[$who]=$!
done
sleep 3
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(((e - s) / 100000)); }
for i in $(seq 1 "$ROUNDS"); do
  for who in A B; do
    bin=${!who} st=$W/store$who m=$W/m$who-$i
    echo "$who mount $(ms "$bin" --store "$st" mount "${SNAP[$who]}" "$m" --json)"
    for f in $(ls "$m"/*/*.c | head -10); do echo "// $i" >>"$f"; done
    echo "$who snapshot $(ms "$bin" --store "$st" snapshot "$m" --json)"
    echo "$who unmount $(ms "$bin" --store "$st" unmount "$m" --json)"
  done
done | tee "$W/times"
python3 "$(dirname "$0")/medians.py" "$W/times"
