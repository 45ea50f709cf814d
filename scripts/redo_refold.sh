#!/usr/bin/env bash
# Post hoc: redo the attributions of run sets on a CPU with their replays' in-step σ refolded as archline folds them
# now (√E[ρ²], benchmarks/refold_replay.py), from their shipped CUPTI traces (scripts/restore_traces.sh first).
# Each set is copied, its replays refolded in the copy, then scripts/redo_runs.sh TAG runs on the copy: logs
# results/h100/bench/attribution-real/redo-<TAG>-<board>-<workload>.log.
#
#   scripts/redo_refold.sh TAG [REDO_ARGS] -- SET_DIR...
set -eu
tag=${1:?name the redo}; shift
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
tmp=$(mktemp -d)
sets=()
for S in "$@"; do
  c="$tmp/$(basename "$S")"
  cp -r "$S" "$c"
  for w in resnet50 transformer; do
    [ -d "$c/$w-replay" ] || continue
    mv "$c/$w-replay" "$c/$w-replay-recorded"
    "$py" benchmarks/refold_replay.py "$c/$w-replay-recorded" "$c/$w-replay"
  done
  sets+=("$c")
done
scripts/redo_runs.sh "$tag" "${args[@]}" -- "${sets[@]}"
rm -rf "$tmp"
