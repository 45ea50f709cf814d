# Sourced by the scripts that redo a shipped attribution with its replay's design refitted another way
# (scripts/design_budget_curve.sh, scripts/alpha_redo.sh). Needs $py (the Python) and the checkout's root as the
# current directory.
#
#   refold_redo LOG SET_DIR TMP LABEL REFOLD_ARG...
#
# copies SET_DIR's transformer-run to TMP-run, refits its transformer-replay with benchmarks/refold_replay.py
# REFOLD_ARG... into TMP-replay, redoes the attribution from the run's shipped trace with those priors
# (benchmarks/redo_attribution.py), all of it logged in LOG (its first line names LABEL, the commit and the refit);
# then sets redo_share, redo_half and redo_top from the log ("?" where absent).
refold_redo() {
  local log=$1 set_dir=$2 tmp=$3 label=$4
  shift 4
  cp -r "$set_dir/transformer-run" "$tmp-run"
  { echo "# $label at $(git describe --always --dirty): refold_replay.py $*, then redo_attribution.py"
    "$py" benchmarks/refold_replay.py "$set_dir/transformer-replay" "$tmp-replay" "$@"
    "$py" benchmarks/redo_attribution.py "$tmp-run" --cupti "$tmp-run"/raw/cupti/*.bin.xz --prior-replay "$tmp-replay"
  } >"$log" 2>&1
  redo_share=$(sed -n 's/.*identifiable with ±15 % intervals: \([0-9.]*\) %.*/\1/p' "$log")
  redo_half=$(sed -n 's/.*energy-weighted median 95 % half-width \([0-9.]*\) %.*/\1/p' "$log")
  redo_top=$(sed -n 's/.*top-10 vs replay: \([0-9]* of [0-9]*\) within.*/\1/p' "$log")
  redo_share=${redo_share:-?} redo_half=${redo_half:-?} redo_top=${redo_top:-?}
}
