#!/usr/bin/env bash
# The four attribution tables of a session's run sets, as docs/data/attribution_s29.txt and _s30.txt show them:
# design_table.py, top10_table.py, design_power.py and row_shares.py --top 6, each under a '== tool' line.
#   scripts/redo_tables.sh RUN_SET [...]     (PYTHON: the interpreter, python3 by default)
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
echo "== design_table.py"
$py benchmarks/design_table.py "$@"
echo "== top10_table.py"
$py benchmarks/top10_table.py "$@"
echo "== design_power.py"
$py benchmarks/design_power.py "$@"
echo "== row_shares.py"
$py benchmarks/row_shares.py --top 6 "$@"
