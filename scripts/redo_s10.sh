#!/usr/bin/env bash
# Redo session 10's five attributions on a CPU with the current rule, from their shipped CUPTI traces, each on a copy of
# its run directory (the redo rewrites it); logs beside the runs' own, redo-s10-<rule>-<board>-<workload>.log, each with
# the redone attribution.json beside it.
#
#   [REDO_ARGS="--ceiling-w 959"] scripts/redo_s10.sh RULE     (RULE names the rule in the logs' names)
set -eu
rule=${1:?name the rule}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
S=results/h100/attribution-s10
L=results/h100/bench/attribution-real
tmp=$(mktemp -d)
for set in calibration-GPU-9abc3476 heldout-capped-priors-GPU-de6a1c5f long-step-transformer-batch128-GPU-1da8ba88; do
  board=${set##*-GPU-}
  for w in resnet50 transformer; do
    [ -d "$S/$set/$w-run" ] || continue
    ls $S/$set/$w-run/raw/cupti/*.bin.xz >/dev/null 2>&1 || { echo "$S/$set/$w-run: no raw CUPTI trace; run scripts/restore_traces.sh" >&2; exit 2; }
    cp -r "$S/$set/$w-run" "$tmp/$set-$w"
    log="$L/redo-s10-$rule-GPU-$board-$w.log"
    { echo "# scripts/redo_s10.sh $rule at $(git rev-parse --short HEAD): python benchmarks/redo_attribution.py $S/$set/$w-run" \
        "--cupti $S/$set/$w-run/raw/cupti/*.bin.xz --prior-replay $S/$set/$w-replay ${REDO_ARGS:-} (on a copy of the run directory)"
      "$py" benchmarks/redo_attribution.py "$tmp/$set-$w" --cupti "$tmp/$set-$w"/raw/cupti/*.bin.xz ${REDO_ARGS:-} \
        --prior-replay "$S/$set/$w-replay" --save "${log%.log}.attribution.json" 2>&1
      "$py" -c 'import json, sys; c = json.load(open(sys.argv[1]))["extra"]["capped_priors_w"]
print(f"capped priors: {len(c)}" + (f", {min(c.values()):.0f} to {max(c.values()):.0f} W over the loop time per call" if c else ""))' \
        "${log%.log}.attribution.json"; } >"$log"
    echo "$log"; grep -E "identifiable:|with ±15|scale |at the power bound" "$log" | sed 's/^/   /'
  done
done
rm -rf "$tmp"
