"""Figures for the kernel generator: build and SASS-inspection time, registers, body sizes, verify cost.

Usage: python benchmarks/bench_kernels.py [--table] [--sm-count 132]

Prints how long it takes to generate the whole catalogue and to assemble and disassemble it
(ptxas -O3 for everything, -O0 for the instruction suite), the register and spill summary, the
largest loop bodies (SASS bytes against the instruction cache), the smallest fraction of issued
instructions that are targets, and how long verify takes on a full-size (H100) launch.
With ``--table`` it also prints one line per kernel.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from archline.characterize.kernels.catalogue import catalogue
from archline.characterize.kernels.chains import seed_state_np, state_words
from archline.characterize.kernels.instructions import instruction_chain
from archline.characterize.kernels.ptx import SEED
from archline.characterize.kernels.target import Target
from archline.characterize.kernels.verify import expected_live
from archline.core.kernel import KernelSpec
from archline.hw import sass


def _chain_outputs(name: str, key: str, chains: int, rounds: int, threads: int, iters: int) -> dict[str, np.ndarray]:
    defn = instruction_chain(key)
    classes = [cls for _, cls, _ in defn.state]
    words = [np.full(threads, expected_live(SEED, iters), np.uint32)]
    for j in range(chains):
        st = defn.ref.advance(seed_state_np(defn, threads, SEED, j), iters * rounds, defn.ops(), threads)
        assert st is not None, name
        words += state_words(st, classes)
    return {"out": np.stack(words).reshape(-1)}


_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_OFF = re.compile(r"/\*([0-9a-f]{4,})\*/")


def _loop_overhead(spec: KernelSpec) -> float:
    """Share of the outer loop's SASS that is not a target instruction (read from labels)."""
    tool = sass.find_nvdisasm()
    assert tool is not None
    comp = sass.compile_ptx(spec.ptx)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(comp.cubin)
        text = subprocess.run([str(tool), "-c", str(path)], capture_output=True, text=True, check=True).stdout
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        if m := _LABEL.match(line):
            pending.append(m.group(1))
        elif (o := _OFF.search(line)) is not None:
            for lab in pending:
                labels[lab] = int(o.group(1), 16)
            pending = []
    instrs = sass.parse_sass(text)
    best = (0, 0)
    for ins in instrs:
        if ins.mnemonic == "BRA":
            lab = ins.operands.strip("`() ")
            if lab in labels and labels[lab] < ins.offset and ins.offset - labels[lab] > best[1] - best[0]:
                best = (labels[lab], ins.offset)
    body = [i for i in instrs if best[0] <= i.offset <= best[1]]
    hits = sum(1 for i in body if any(re.match(c.opcode, i.mnemonic) for c in spec.sass))
    return 1 - hits / len(body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="one line per kernel")
    ap.add_argument("--sm-count", type=int, default=132)
    args = ap.parse_args()
    target = Target(sm_count=args.sm_count)

    t0 = time.perf_counter()
    specs = catalogue(target)
    t_build = time.perf_counter() - t0
    print(f"catalogue: {len(specs)} kernels in {t_build:.2f} s  {dict(Counter(s.group for s in specs))}")

    t0 = time.perf_counter()
    rep = sass.inspect_many([s.ptx for s in specs], opt_level=3)
    t_o3 = time.perf_counter() - t0
    inst = [s for s in specs if s.group == "instruction"]
    t0 = time.perf_counter()
    sass.inspect_many([s.ptx for s in inst], opt_level=0)
    t_o0 = time.perf_counter() - t0
    print(f"ptxas -O3 + nvdisasm, all kernels: {t_o3:.1f} s; -O0 instruction suite ({len(inst)}): {t_o0:.1f} s")

    fails = [f for s, r in zip(specs, rep, strict=True) for f in sass.check_sass(s, r.instructions)]
    spills = [s.name for s, r in zip(specs, rep, strict=True) if r.spills]
    regs = Counter(r.registers for r in rep)
    print(f"SASS checks failed: {len(fails)}; kernels with spills: {len(spills)} {spills[:5]}")
    print(f"registers per thread (count of kernels): {dict(sorted(regs.items()))}")
    by_group: dict[str, list[int]] = {}
    for s, r in zip(specs, rep, strict=True):
        by_group.setdefault(s.group, []).append(r.registers)
    print("max registers by group:", {g: max(v) for g, v in by_group.items()})
    sizes = sorted(((len(r.instructions) * 16, s.name) for s, r in zip(specs, rep, strict=True)), reverse=True)
    print("largest kernels (bytes of SASS, whole kernel):", ", ".join(f"{n} {b}" for b, n in sizes[:4]))
    # Divisions expand to ~10-30 SASS per PTX div (only MUFU.RCP is a check) and popc carries an
    # IMAD per step by design, so they are listed apart.
    special = ("arith.fp32.div", "arith.int32.popc")
    loops = sorted((_loop_overhead(s), s.name) for s in specs if s.group == "arithmetic" and "occupancy" not in s.tags)
    plain = [x for x in loops if not x[1].startswith(special)]
    print(
        "loop overhead (non-target SASS in the outer loop / loop SASS), arithmetic kernels: "
        f"median {plain[len(plain) // 2][0]:.2%}, highest " + ", ".join(f"{n} {v:.2%}" for v, n in plain[-3:])
    )
    print("  expanded or carrier kernels: " + ", ".join(f"{n} {v:.0%}" for v, n in loops if n.startswith(special)))

    by_name = {s.name: s for s in specs}
    for name, key, chains in (("arith.fp32.fma", "fma.f32", 8), ("arith.int32.add", "add.u32", 6)):
        spec = by_name[name]
        threads = spec.launch.grid_for(args.sm_count) * spec.launch.block
        rounds = int(spec.work.ops) // (chains * instruction_chain(key).targets_per_round)
        iters = 200_000
        outs = _chain_outputs(name, key, chains, rounds, threads, iters)
        scalars = {a.name: a.value for a in spec.args if a.value is not None}
        scalars.update(iters=iters, threads=threads, grid=threads // spec.launch.block, block=spec.launch.block)
        assert spec.verify is not None
        t0 = time.perf_counter()
        why = spec.verify(outs, scalars)  # type: ignore[arg-type]
        dt = time.perf_counter() - t0
        print(f"verify {name}: {threads} threads, iters={iters}: {dt * 1e3:.0f} ms, result={why!r}")

    if args.table:
        print(f"{'kernel':40s} {'regs':>4s} {'SASS':>5s} {'ops/trip':>9s} checks")
        for s, r in zip(specs, rep, strict=True):
            print(
                f"{s.name:40s} {r.registers:4d} {len(r.instructions):5d} {s.work.ops:9.0f} "
                f"{sass.expected_checks(s.sass)}"
            )


if __name__ == "__main__":
    main()
