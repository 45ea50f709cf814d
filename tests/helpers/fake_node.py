"""A fake node of several GPUs on one fake clock, and a fake ``torchrun`` whose worker processes run kernels on them.

The launcher (``python fake_node.py --nproc N --mode M``) starts N worker processes as torchrun does
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``; ``CUDA_VISIBLE_DEVICES`` as the mode says). Each worker
'runs' kernels of known power on its GPU, from the fake time the node hands the program, and writes
what the injection library would: its own ``cupti-<pid>-<ns>.bin`` with its PROCESS chunk, its
DEVICES chunk (its CUDA ordinals named by UUID, as the driver would resolve them) and its activities;
and, for the node, the truth: every kernel with its GPU's UUID and power. The node then puts those
kernels on its GPUs, whose sensors report their energy.

Modes (how a rank's CUDA ordinal relates to the NVML index of the GPU it runs on):
``plain``: no CUDA_VISIBLE_DEVICES, rank r uses ordinal r = NVML r; ``swap``: every rank sees
``CUDA_VISIBLE_DEVICES=1,0`` and uses ordinal r, so rank 0 runs on NVML 1; ``isolated``: rank r
sees only NVML ``n-1-r`` as its ordinal 0 (both ranks' device 0 are different GPUs); ``shared``: every
rank sees only NVML 0 (the ranks share one GPU, the others stay idle).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a program: make `tests` and `archline` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from archline.hw.cupti.inject import ACTIVITY_DTYPE, ActivityType, ChunkType
from archline.hw.cupti.processes import DEVICE_DTYPE
from archline.measurement.attribute.backend import Backend
from archline.measurement.attribute.program import ProgramSpec, run_binary
from tests.helpers.attrib_fakes import (
    CHILD_END_FILE,
    CHILD_START_NS,
    BufferSource,
    CounterSource,
    FakeGPU,
    injection_chunk,
)
from tests.helpers.fake_gpu import FakeClock

#: The node's GPUs' UUIDs in NVML order (the fake driver's view), and where workers write the truth.
FAKE_UUIDS = "ARCHLINE_FAKE_UUIDS"
FAKE_TRUTH_DIR = "ARCHLINE_FAKE_TRUTH_DIR"
HERE = Path(__file__).resolve()
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def node_uuid(i: int) -> str:
    return f"GPU-{0xA0 + i:08x}-1111-2222-3333-{i:012x}"


def kernel_power_w(name: str, gpu: int) -> float:
    """The true power of a kernel on NVML GPU ``gpu``: each GPU draws its own (so a kernel put on the wrong
    GPU's sensors shows)."""
    base = {"gemm_kernel": 420.0, "elementwise_kernel": 230.0, NCCL: 170.0}[name]
    return base + 25.0 * gpu


class FakeNode:
    """``n`` fake GPUs sharing one fake clock, each with its UUID, name, idle power and sensors."""

    def __init__(
        self,
        n: int = 2,
        *,
        names: Sequence[str] | None = None,
        drivers: Sequence[str] | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock = clock or FakeClock()
        self.gpus = [FakeGPU(idle_w=100.0 - 10 * i, clock=self.clock) for i in range(n)]
        self.uuids = [node_uuid(i) for i in range(n)]
        self.names = list(names or ["Fake GPU"] * n)
        self.drivers = list(drivers or ["999.1"] * n)
        #: Every kernel the last program ran: (NVML index, name, start s, end s, power W, pid, rank).
        self.truth: list[tuple[int, str, float, float, float, int, int]] = []

    def run_child(self, spec: ProgramSpec, env: Mapping[str, str], *, stdout_to_stderr: bool = False) -> int:
        with tempfile.TemporaryDirectory(prefix="archline-fake-node-") as tmp:
            end_file = Path(tmp) / "end"
            truth = Path(tmp) / "truth"
            truth.mkdir()
            env = {**env, CHILD_START_NS: str(round(self.clock.now_s() * 1e9)), CHILD_END_FILE: str(end_file),
                   FAKE_UUIDS: ",".join(self.uuids), FAKE_TRUTH_DIR: str(truth)}  # fmt: skip
            code = run_binary(spec, env, stdout_to_stderr=stdout_to_stderr)
            for f in sorted(truth.glob("*.json")):
                for uuid, name, s, e, p, pid, rank in json.loads(f.read_text()):
                    g = self.uuids.index(uuid)
                    self.gpus[g].kernels.append((name, s, e, p))
                    self.truth.append((g, name, s, e, p, pid, rank))
            text = end_file.read_text().strip() if end_file.is_file() else ""
        end_s = int(text) * 1e-9 if text else self.clock.now_s() + 0.2
        self.clock.sleep(end_s - self.clock.now_s())
        return code

    def true_energy_j(self, gpu: int, name: str) -> float:
        return sum(p * (e - s) for g, n, s, e, p, _, _ in self.truth if g == gpu and n == name)

    def backend(self, *, injection: Path | None) -> Backend:
        def open_sources(gpu: int) -> list[Any]:
            return [CounterSource(self.gpus[gpu]), BufferSource(self.gpus[gpu])]

        def static(gpu: int) -> dict[str, Any]:
            return {"index": gpu, "name": self.names[gpu], "uuid": self.uuids[gpu], "driver_version": self.drivers[gpu]}

        def state(gpu: int) -> dict[str, Any]:
            return {"power_limit_w": 700.0, "sm_clock_mhz": 1980, "persistence_mode": True}

        def build() -> Path:
            from archline.errors import CUPTIUnavailableError

            if injection is None:
                raise CUPTIUnavailableError("CUPTI headers and library not found (fake node)")
            return injection

        def no_tracer(on_batch: Any) -> Any:
            raise AssertionError("a multi-GPU run never traces in-process")

        return Backend(open_sources, static, state, no_tracer, clock=self.clock, injection=build, pre_s=0.15,
                       post_s=0.15, run_child=self.run_child, device_count=lambda: len(self.gpus))  # fmt: skip


# --------------------------------------------------------------------------- the program's side


def process_output(
    kernels: Sequence[tuple[str, int, int, int]], *, env: Mapping[str, str], devices: Mapping[int, str], t0_ns: int
) -> bytes:
    """What cupti_inject.c writes for one process: PROCESS, DEVICES, clock pairs (device clock = host clock),
    names and activities (name, start ns, end ns, CUDA device id)."""
    text = "\t".join(f"{k}={v}" for k, v in env.items()).encode() + b"\0"
    out = injection_chunk(ChunkType.PROCESS, 1, text)
    devs = np.zeros(len(devices), DEVICE_DTYPE)
    for i, (ordinal, uuid) in enumerate(sorted(devices.items())):
        devs[i] = (ordinal, 1, 1, 0, np.frombuffer(bytes.fromhex(uuid[4:].replace("-", "")), "u1"), b"Fake GPU")
    out += injection_chunk(ChunkType.DEVICES, len(devs), devs.tobytes())
    out += injection_chunk(ChunkType.CLOCK_START, 1, struct.pack("<3Q", t0_ns, t0_ns, t0_ns + 40))
    ids = {name: i + 1 for i, name in enumerate(dict.fromkeys(k[0] for k in kernels))}
    names = b"".join(struct.pack("<II", i, len(n.encode())) + n.encode() + b"\0" * (-len(n.encode()) % 8)
                     for n, i in ids.items())  # fmt: skip
    out += injection_chunk(ChunkType.NAMES, len(ids), names)
    acts = np.zeros(len(kernels), ACTIVITY_DTYPE)
    for j, (name, s, e, dev) in enumerate(kernels):
        acts[j] = (ActivityType.KERNEL, 0, 0, ids[name], s, e, 7, j + 1, dev, 0, 0)
    out += injection_chunk(ChunkType.ACTIVITIES, len(acts), acts.tobytes())
    last = max(e for _, _, e, _ in kernels) + 1_000_000
    return out + injection_chunk(ChunkType.CLOCK_END, 1, struct.pack("<3Q", last, last, last + 40))


def _schedule(rank: int, t0_ns: int, blocks: int) -> list[tuple[str, int, int]]:
    """Blocks of one kind of kernel, of random lengths, some followed by idle time: each 20 ms counter window
    holds its own mix."""
    rng = np.random.default_rng(11 + rank)
    out, t = [], t0_ns
    kinds = [("gemm_kernel", 5_000_000), ("elementwise_kernel", 4_000_000), (NCCL, 3_000_000)]
    for _ in range(blocks):
        name, dur = kinds[int(rng.integers(3))]
        for _ in range(int(rng.integers(2, 12))):
            out.append((name, t, t + dur))
            t += dur + 20_000
        if rng.random() < 0.3:
            t += int(rng.integers(5, 25)) * 1_000_000
    return out


def worker(blocks: int) -> int:
    env = os.environ
    rank, local = int(env["RANK"]), int(env["LOCAL_RANK"])
    uuids = env[FAKE_UUIDS].split(",")
    visible = [int(v) for v in env["CUDA_VISIBLE_DEVICES"].split(",")] if "CUDA_VISIBLE_DEVICES" in env else None
    order = visible if visible is not None else list(range(len(uuids)))
    ordinal = local % len(order)  # torch.cuda.set_device(LOCAL_RANK)
    gpu = order[ordinal]  # the fake driver: ordinal → NVML index → UUID
    t0 = int(env[CHILD_START_NS])
    kernels = _schedule(rank, t0, blocks)
    pid = os.getpid()
    truth = [(uuids[gpu], n, s * 1e-9, e * 1e-9, kernel_power_w(n, gpu), pid, rank) for n, s, e in kernels]
    Path(env[FAKE_TRUTH_DIR], f"{pid}.json").write_text(json.dumps(truth))
    out = env.get("ARCHLINE_CUPTI_OUT")
    if out:  # the injection library is loaded: it writes this process's trace
        launcher_vars = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES")
        info = {"pid": pid, "ppid": os.getppid(), "host": "fake-node", **{k: env[k] for k in launcher_vars if k in env}}
        devices = {i: uuids[g] for i, g in enumerate(order)}
        data = process_output([(n, s, e, ordinal) for n, s, e in kernels], env=info, devices=devices, t0_ns=t0)
        Path(out, f"cupti-{pid}-{t0}.bin").write_bytes(data)
    print(max(e for _, _, e in kernels))
    return 0


def launcher(nproc: int, mode: str, blocks: int) -> int:
    procs = []
    for r in range(nproc):
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(nproc)}
        if mode == "swap":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in reversed(range(nproc)))
        elif mode == "isolated":
            env["CUDA_VISIBLE_DEVICES"] = str(nproc - 1 - r)
        elif mode == "shared":
            env["CUDA_VISIBLE_DEVICES"] = "0"
        cmd = [sys.executable, str(HERE), "--worker", "--blocks", str(blocks)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    ends = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            return p.returncode
        ends.append(int(out.strip().splitlines()[-1]))
    Path(os.environ[CHILD_END_FILE]).write_text(str(max(ends) + 1_000_000))
    print(f"launcher: {nproc} ranks done")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--mode", choices=("plain", "swap", "isolated", "shared"), default="plain")
    ap.add_argument("--blocks", type=int, default=24)
    a = ap.parse_args(argv)
    return worker(a.blocks) if a.worker else launcher(a.nproc, a.mode, a.blocks)


if __name__ == "__main__":
    sys.exit(main())
