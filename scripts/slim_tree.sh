#!/usr/bin/env bash
# Keep the working tree under the device tool's 64 MiB: the shipped runs that only the docs and tests read (the
# attribution run sets, replay across processes, the H200 node run: about 40 MB of the 61 MB under results/) are moved
# out of the tree for a device call and back after it. What the wheel needs at run time stays (results/ ships as
# archline/_shipped: the sensor calibrations, the burst-power ceilings, the characterize runs).
#
#   scripts/slim_tree.sh out       move them to $ARCHLINE_STASH (/tmp/archline-results-stash by default)
#   scripts/slim_tree.sh back      move them back
#
# Commit first: a change made to them while they are out is a change to the stash.
set -eu
cd "$(dirname "$0")/.."
stash=${ARCHLINE_STASH:-/tmp/archline-results-stash}
case "${1:-}" in
  out)
    [ -e "$stash" ] && { echo "slim_tree: $stash exists: run 'scripts/slim_tree.sh back' first" >&2; exit 2; }
    [ -z "$(git status --porcelain -- results)" ] || { echo "slim_tree: results/ has changes: commit them first" >&2; exit 2; }
    mkdir -p "$stash"
    n=0
    for d in results/*/attribution-* results/*/replay-across-* results/h200/node; do
      [ -d "$d" ] || continue
      if ! { mkdir -p "$stash/$(dirname "$d")" && mv "$d" "$stash/$d"; }; then
        echo "slim_tree: could not move $d (moved so far: $n; 'scripts/slim_tree.sh back' brings them back)" >&2; exit 1
      fi
      n=$((n + 1))
    done
    echo "$n folders of results/ moved to $stash" ;;
  back)
    [ -d "$stash" ] || { echo "slim_tree: nothing at $stash" >&2; exit 2; }
    n=0
    while IFS= read -r d; do
      [ -e "$d" ] && { echo "slim_tree: $d exists here: not overwriting it (the rest stays in $stash)" >&2; exit 2; }
      if ! { mkdir -p "$(dirname "$d")" && mv "$stash/$d" "$d"; }; then
        echo "slim_tree: could not move $d back (the rest stays in $stash)" >&2; exit 1
      fi
      n=$((n + 1))
    done < <(cd "$stash" && find results -mindepth 2 -maxdepth 2 -type d | sort)
    find "$stash" -depth -type d -empty -delete
    [ -e "$stash" ] && { echo "slim_tree: $stash still holds files" >&2; exit 2; }
    echo "$n folders of results/ back from $stash" ;;
  *) echo "usage: scripts/slim_tree.sh out|back" >&2; exit 2 ;;
esac
