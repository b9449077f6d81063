#!/bin/bash
# Two builds of cairn alternately, one command at a time, on one store of the corpus:
# status and snapshot with nothing changed, then rollback, checkpoint and rewind each after
# 10 files changed. Prints "A|B OPERATION MS" lines, then each median.
#   benches/ab/commands.sh AFTER_BINARY BEFORE_BINARY [CORPUS] [ROUNDS]
set -euo pipefail
A=$1 B=$2
CORPUS=${3:-$(../shared/bench/linux-corpus.sh | tail -1)}
ROUNDS=${4:-15}
W=$(mktemp -d /tmp/cairn-ab-XXXXXX)
trap 'rm -rf "$W"' EXIT
cp -a "$CORPUS" "$W/src"
S=$("$A" --store "$W/store" onboard "$W/src" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["snapshot"])')
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(((e - s) / 100000)); }
change() { for f in $(ls "$W"/src/*/*.c | head -10); do echo "// $RANDOM" >>"$f"; done; }
for _ in $(seq 1 "$ROUNDS"); do
  for who in A B; do
    bin=${!who}
    echo "$who status $(ms "$bin" --store "$W/store" status "$W/src" --json)"
    echo "$who snapshot $(ms "$bin" --store "$W/store" snapshot "$W/src" --json)"
    change; echo "$who rollback $(ms "$bin" --store "$W/store" rollback "$W/src" "$S" --json)"
    change; echo "$who checkpoint $(ms "$bin" --store "$W/store" checkpoint "$W/src" --json)"
    change; echo "$who rewind $(ms "$bin" --store "$W/store" rewind "$W/src" --json)"
  done
done | tee "$W/times"
python3 "$(dirname "$0")/medians.py" "$W/times"
