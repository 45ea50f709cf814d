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
tmp=$(mktemp -d)
printf '%-14s %-12s %5s %8s %10s %8s\n' board batch alpha "±15 %" "half-w %" "top-10"
for S in "$@"; do
  board=${S##*-GPU-}; gpu=$(echo "$S" | sed -n 's|.*results/\([^/]*\)/.*|\1|p'); L=${ALPHA_LOGS:-results/${gpu:-h100}/bench/attribution-real}
  set_name=$(basename "$S"); batch=${set_name%%-GPU-*}
  for a in $alphas; do
    r="$tmp/$board-$batch-$a-replay"; w="$tmp/$board-$batch-$a-run"; log="$L/alpha-s23-$board-$batch-a$a.log"
    cp -r "$S/transformer-run" "$w"
    { echo "# scripts/alpha_redo.sh at $(git describe --always --dirty): refold_replay.py --alpha $a, then redo_attribution.py"
      "$py" benchmarks/refold_replay.py "$S/transformer-replay" "$r" --alpha "$a"
      "$py" benchmarks/redo_attribution.py "$w" --cupti "$w"/raw/cupti/*.bin.xz --prior-replay "$r"; } >"$log" 2>&1
    share=$(sed -n 's/.*identifiable with ±15 % intervals: \([0-9.]*\) %.*/\1/p' "$log")
    half=$(sed -n 's/.*energy-weighted median 95 % half-width \([0-9.]*\) %.*/\1/p' "$log")
    top=$(sed -n 's/.*top-10 vs replay: \([0-9]* of [0-9]*\) within.*/\1/p' "$log")
    printf '%-14s %-12s %5s %8s %10s %8s\n' "GPU-$board" "$batch" "$a" "${share:-?}" "${half:-?}" "${top:-?}"
  done
done
rm -rf "$tmp"
