#!/usr/bin/env bash
# Bring back the raw CUPTI traces of the shipped attribution runs (results/<gpu>/attribution-s1*/…/raw/cupti/*.bin.xz).
# They are kept in the history, not in the working tree: with them the checkout is larger than the 64 MiB the
# device tool sends. scripts/redo_s10.sh and scripts/redo_runs.sh need them; `git rm --cached` them before a device call.
#
#   scripts/restore_traces.sh
set -eu
cd "$(dirname "$0")/.."
commits="86cef85 a6441e1 454ec9c 4c9e02d f193d85 06601a3 5be33cf e9b5efb 9a6ea5e f15a0bf 479c5f4 df59dde f4ef505 fab9b6a 857154d ed95e89 2540a1b 98a068d cab09fe 59364fd 153aafe 9da486b 6d4ffef 3350232 af507e6 6f386f9 ef5ef8e d1789f9 6256572 6ca2bcd"
n=0
for commit in $commits; do
  files=$(git ls-tree -r --name-only "$commit" results | grep -E '/raw/cupti/[^/]+\.bin\.xz$' || true)
  [ -n "$files" ] || continue
  # written from the history without touching the index (a checkout and reset would undo a staged removal)
  for f in $files; do
    mkdir -p "$(dirname "$f")" && git show "$commit:$f" >"$f"
    n=$((n + 1))
  done
done
echo "$n traces restored"
