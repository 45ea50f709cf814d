#!/usr/bin/env bash
# The fold with the neighbour dependence scaling as |e|^(α/2) (session 23): each set's transformer design refitted with
# --alpha A (benchmarks/refold_replay.py, the design model as recorded), then the attribution redone from the run's
# shipped trace with those priors (benchmarks/redo_attribution.py). α = 2 is archline's fold: its line must give the
# run's own figures back. One log per set and α under results/<gpu>/bench/attribution-real/alpha-s23-<board>-a<A>.log,
# and a line per redo on stdout (ALPHA_LOGS: another folder for the logs):
#
#   scripts/restore_traces.sh && scripts/alpha_redo.sh "2 1.5" SET_DIR... > docs/data/alpha_redo_s23.txt
set -eu
alphas=${1:?the exponents}; shift
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
# shellcheck source=scripts/redo_common.sh
. scripts/redo_common.sh
tmp=$(mktemp -d)
printf '%-14s %-12s %5s %8s %10s %8s\n' board batch alpha "±15 %" "half-w %" "top-10"
for S in "$@"; do
  board=${S##*-GPU-}; gpu=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); L=${ALPHA_LOGS:-results/${gpu:-h100}/bench/attribution-real}
  set_name=$(basename "$S"); batch=${set_name%%-GPU-*}
  for a in $alphas; do
    log="$L/alpha-s23-$board-$batch-a$a.log"
    refold_redo "$log" "$S" "$tmp/$board-$batch-$a" scripts/alpha_redo.sh --alpha "$a"
    printf '%-14s %-12s %5s %8s %10s %8s\n' "GPU-$board" "$batch" "$a" "$redo_share" "$redo_half" "$redo_top"
  done
done
rm -rf "$tmp"
