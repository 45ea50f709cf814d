#!/usr/bin/env bash
# Redo the attributions of run sets on a CPU with the current rules, from their shipped CUPTI traces, each on a copy
# of its run directory (the redo rewrites it); a log per run beside the runs' own logs,
# results/<gpu>/bench/attribution-real/redo-<TAG>-<board>-<workload>.log (<gpu>: the set's, from its path
# results/<gpu>/...; a set outside results/ counts as h100), with the redone attribution.json beside it.
#
#   scripts/redo_runs.sh TAG [REDO_ARGS] -- SET_DIR...     (REDO_ARGS e.g. --no-ceiling: every row bounded by the limit)
#
# REFOLD=1 first refolds each set's replays (in a copy) as archline folds them now, √E[ρ²] since session 12
# (benchmarks/refold_replay.py): post hoc, for replays recorded with the 95 % bound folded in. REFOLD_ARGS go to
# refold_replay.py (--no-replicates: a session-14 replay refitted without its replicates).
set -eu
tag=${1:?name the redo}; shift
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
tmp=$(mktemp -d)
if [ "${REFOLD:-0}" = 1 ]; then
  sets=(); i=0
  for S in "$@"; do
    # the copy's path keeps results/<gpu>/: it names the set's GPU (below)
    g=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); i=$((i + 1))
    c="$tmp/sets/$i/results/${g:-h100}/$(basename "$S")"; mkdir -p "$(dirname "$c")"; cp -r "$S" "$c"
    for w in resnet50 transformer; do
      [ -d "$c/$w-replay" ] || continue
      mv "$c/$w-replay" "$c/$w-replay-recorded"
      "$py" benchmarks/refold_replay.py "$c/$w-replay-recorded" "$c/$w-replay" ${REFOLD_ARGS:-}
    done
    sets+=("$c")
  done
  set -- "${sets[@]}"
fi
for S in "$@"; do
  set_name=$(basename "$S"); board=${set_name##*-GPU-}
  gpu=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); L=results/${gpu:-h100}/bench/attribution-real; mkdir -p "$L"
  for w in resnet50 transformer; do
    [ -d "$S/$w-run" ] || continue
    ls $S/$w-run/raw/cupti/*.bin.xz >/dev/null 2>&1 || { echo "$S/$w-run: no raw CUPTI trace; run scripts/restore_traces.sh" >&2; exit 2; }
    cp -r "$S/$w-run" "$tmp/$set_name-$w"
    log="$L/redo-$tag-GPU-$board-$w.log"
    { echo "# ${REFOLD:+REFOLD=$REFOLD ${REFOLD_ARGS:+REFOLD_ARGS=\"$REFOLD_ARGS\" }(replays refolded: benchmarks/refold_replay.py) }scripts/redo_runs.sh $tag ${args[*]:-} at $(git describe --always --dirty): python benchmarks/redo_attribution.py" \
        "$S/$w-run --cupti $S/$w-run/raw/cupti/*.bin.xz --prior-replay $S/$w-replay ${args[*]:-} (on a copy of the run directory)"
      "$py" benchmarks/redo_attribution.py "$tmp/$set_name-$w" --cupti "$tmp/$set_name-$w"/raw/cupti/*.bin.xz \
        --prior-replay "$S/$w-replay" --save "${log%.log}.attribution.json" "${args[@]}" 2>&1
      "$py" -c 'import json, sys; c = json.load(open(sys.argv[1]))["extra"]["capped_priors_w"]
print(f"capped priors: {len(c)}" + (f", {min(c.values()):.0f} to {max(c.values()):.0f} W over the loop time per call" if c else ""))' \
        "${log%.log}.attribution.json"; } >"$log"
    echo "$log"; grep -E "identifiable:|with ±15|scale |at their power bound|at the power bound" "$log" | cut -c1-220 | sed 's/^/   /'
  done
done
rm -rf "$tmp"
