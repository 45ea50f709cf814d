"""Several GPUs from one command: the same archline command run once per GPU, concurrently (one process each)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

__all__ = ["GPUChild", "child_argv", "fan_out", "run_per_gpu", "safe_env"]

#: NVLink multicast off in every child (the GPU machines' notes require it).
SAFE_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

_VALUED = {"--gpu", "-o", "--output", "--out", "-g"}


@dataclass(frozen=True)
class GPUChild:
    """One GPU's process: its index, run directory, log file and exit status."""

    gpu: int
    output: Path
    log: Path
    returncode: int


def child_argv(argv: Sequence[str], gpu: int, output: Path) -> list[str]:
    """``argv`` (an archline command line, without the program name) for one GPU and its own run directory."""
    out: list[str] = []
    skip = False
    for i, tok in enumerate(argv):
        if skip:
            skip = False
            continue
        if tok == "--":
            out += list(argv[i:])
            break
        name = tok.split("=", 1)[0]
        if name in _VALUED:
            skip = "=" not in tok
            continue
        out.append(tok)
    cut = out.index("--") if "--" in out else len(out)
    return [*out[:cut], "--gpu", str(gpu), "--output", str(output), *out[cut:]]


def safe_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with NVLink multicast switched off."""
    env = dict(os.environ if base is None else base)
    env.update(SAFE_ENV)
    return env


def run_per_gpu(argv: Sequence[str], gpus: Sequence[int], output: Path, extra: Sequence[str] = ()) -> list[GPUChild]:
    """Run ``archline argv`` once per GPU at the same time, each into ``output/runs/gpu<i>``; wait for all.

    Each child gets its own CUDA context (its own process); its output goes to ``output/runs/gpu<i>.log``.
    """
    (output / "runs").mkdir(parents=True, exist_ok=True)
    procs: list[tuple[int, Path, Path, subprocess.Popen[bytes]]] = []
    try:
        for g in gpus:
            run_dir = output / "runs" / f"gpu{g}"
            log = output / "runs" / f"gpu{g}.log"
            with open(log, "wb") as fh:
                cmd = [
                    sys.executable,
                    "-m",
                    "archline",
                    *child_argv([*argv, *extra] if "--" not in argv else argv, g, run_dir),
                ]
                procs.append(
                    (g, run_dir, log, subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=safe_env()))
                )
        return [GPUChild(g, d, log, p.wait()) for g, d, log, p in procs]
    except KeyboardInterrupt:
        for *_, p in procs:
            p.terminate()
        for *_, p in procs:
            p.wait()
        raise


def fan_out(
    command: str, gpus: Sequence[int], output: Path, *, force: bool, report: bool, extra: Sequence[str] = ()
) -> list[GPUChild]:
    """``archline <command>`` on every GPU of ``gpus`` at once; a fleet run directory at ``output`` lists them.

    ``extra`` options go to every child. With ``report`` the fleet report compares the GPUs side by side.
    Exits 1 if any GPU's run failed.
    """
    import socket
    import time

    from archline.cli._common import console, err_console
    from archline.records import Manifest, RunDir

    rd = RunDir.create(output, Manifest.new("fleet", extra={"kind": command, "gpus": list(gpus)}), overwrite=force)
    err_console.print(f"archline: {command} on GPUs {', '.join(map(str, gpus))} at once (one process each)")
    t0 = time.perf_counter()
    children = run_per_gpu(sys.argv[1:], gpus, output, extra)
    wall_s = time.perf_counter() - t0
    host = socket.gethostname()
    runs = [
        {"label": f"gpu{c.gpu}", "host": host, "gpu": c.gpu, "path": f"runs/gpu{c.gpu}" if c.returncode == 0 else None,
         "error": "" if c.returncode == 0 else f"exit status {c.returncode}; log {c.log}"}
        for c in children
    ]  # fmt: skip
    failed = [r for r in runs if r["error"]]
    notes = tuple(f"{r['label']}: {r['error']}" for r in failed)
    status: Any = "failed" if len(failed) == len(runs) else "complete"
    rd.finish(status, notes=notes, extra={**rd.manifest.extra, "runs": runs, "wall_s": wall_s})
    for c in children:
        mark = "ok" if c.returncode == 0 else f"failed (exit {c.returncode}, log {c.log})"
        console.print(f"GPU {c.gpu}: {c.output} {mark}")
    console.print(f"wall time for {len(children)} GPUs: {wall_s:.1f} s")
    if report and len(failed) < len(runs):
        from archline.report.fleet import render

        rep = render(RunDir.open(output), output)
        console.print(f"report: {rep.markdown}")
    if failed:
        raise typer.Exit(1)
    return children
