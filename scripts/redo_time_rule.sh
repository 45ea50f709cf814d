#!/usr/bin/env bash
# Post hoc (session 20): session 18's held-out busy run (H100 GPU-c7661d05, the one transformer run whose replay
# recorded each group's CUPTI busy time; it suggested the rule) redone on the CPU from its raw CUPTI trace, with its
# replay priors timed by session 19's rule (the design's wall-time share: factor_busy_s taken out of a copy of its
# replay.json) and by session 20's (CUPTI busy time beyond the calls' common shift). Prints issue 13's figures of
# each; docs/data/time_rule_redo_s20.txt is its output. Given a run set, its trace's file name and the commit that holds
# the trace (scripts/restore_traces.sh), it redoes that run instead: session 21 redid its held-out H200 runs so, to
# see what the rule changed on runs it was not chosen on (docs/data/time_rule_redo_s21.txt).
#
#   scripts/redo_time_rule.sh [RUN_SET TRACE COMMIT]       (a transformer run set: its transformer-run/ and -replay/)
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
case $# in
  0) run=results/h100/attribution-s18/heldout-busy-GPU-c7661d05 trace=cupti-1154-1795742951272430846.bin.xz
     commit=df59dde ;;
  3) run=${1%/} trace=$2 commit=$3 ;;
  *) echo "usage: scripts/redo_time_rule.sh [RUN_SET TRACE COMMIT] (a transformer run set)" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$run" "$tmp/set"
git show "$commit:$run/transformer-run/raw/cupti/$trace" >"$tmp/$trace"
cp -r "$tmp/set/transformer-replay" "$tmp/replay-s19"
"$py" - "$tmp/replay-s19" <<'PY'
import csv, json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/replay.json"))
r["design"].pop("factor_busy_s", None)  # a busy-model design's (session 18)
json.dump(r, open(f"{d}/replay.json", "w"))
with open(f"{d}/replay.csv", newline="") as fh:  # every row's busy time (session 20 on)
    rows = list(csv.DictReader(fh))
if rows and "busy_time_s" in rows[0]:
    for row in rows:
        row["busy_time_s"] = ""
    with open(f"{d}/replay.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
PY
for rule in s19 s20; do
  replay=$tmp/set/transformer-replay
  [ "$rule" = s19 ] && replay=$tmp/replay-s19
  "$py" benchmarks/redo_attribution.py "$tmp/set/transformer-run" --cupti "$tmp/$trace" --prior-replay "$replay" \
    >"$tmp/$rule.txt" 2>&1 || { cat "$tmp/$rule.txt" >&2; echo "redo_time_rule: the $rule redo failed" >&2; exit 1; }
  grep -E "^  identifiable:|^PASS/FAIL|calls here run" "$tmp/$rule.txt" | sed -e "s|^|$rule |" -e "s|$tmp/set/||g" | cut -c1-220
done
