# Source me on the lent GPU machine: puts archline (from this checkout) and carried wheels on the path.
# Usage: . scripts/gpu_env.sh
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
archline() { python3 -m archline "$@"; }
export -f archline 2>/dev/null || true
