"""Turn a chain definition into a benchmark KernelSpec: unrolled rounds, SASS checks, host verify."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.chains import (
    ChainDef,
    Reference,
    chain_args,
    check_chain,
    emit_round,
    load_operands,
    seed_chain,
    seed_state_np,
)
from archline.characterize.kernels.ptx import open_frame, slot_count
from archline.characterize.kernels.verify import check_live, out_words, verifier
from archline.core.kernel import KernelSpec, Launch, SassCheck, VerifyFn, Work

__all__ = ["VERIFY_SAMPLE", "chain_kernel", "rounds_for", "sample_threads"]

#: Most threads whose chains verify reproduces on the host (evenly spread); the liveness word
#: is checked for every thread.
VERIFY_SAMPLE = 8192


def rounds_for(defn: ChainDef, chains: int, sass_budget: int, *, minimum: int = 2) -> int:
    """Rounds per loop trip so the body holds about ``sass_budget`` SASS instructions (even count)."""
    per_round = chains * defn.targets_per_round * defn.sass_per_target
    rounds = max(minimum, int(sass_budget // per_round))
    return rounds + (rounds % 2)


def sample_threads(threads: int) -> NDArray[np.int64]:
    if threads <= VERIFY_SAMPLE:
        return np.arange(threads, dtype=np.int64)
    return np.unique(np.linspace(0, threads - 1, VERIFY_SAMPLE).astype(np.int64))


def _chain_verify(defn: ChainDef, chains: int, rounds: int, ref: Reference, words: int) -> VerifyFn:
    classes = [cls for _, cls, _ in defn.state]
    per_chain = sum(slot_count(c) for c in classes)

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        out = out_words(outputs, threads, words)
        check_live(out, seed, iters)
        ops = {o.name: scalars.get(o.name, o.value) for o in defn.operands}
        idx = sample_threads(threads)
        for j in range(chains):
            start = seed_state_np(defn, idx, seed, j)
            got = [out[1 + j * per_chain + k, idx] for k in range(per_chain)]
            check_chain(f"{defn.key} chain {j}", got, start, iters * rounds, classes, ref, ops)

    return verify


def chain_kernel(
    defn: ChainDef,
    *,
    name: str,
    group: str,
    chains: int,
    rounds: int,
    launch: Launch,
    targets: bool = True,
    description: str = "",
    spec_key: str | None = None,
    sweep: tuple[str, float] | None = None,
    tags: tuple[str, ...] = (),
    unit: str | None = None,
    maxnreg: int | None = 32,
) -> KernelSpec:
    """A kernel of ``chains`` independent copies of ``defn``, ``rounds`` rounds per loop trip.

    With ``targets`` False it is the overhead kernel of the instruction suite: the same seeds,
    loop, carrier instructions and stores, without the target instructions.
    """
    entry = "k_" + "".join(ch if ch.isalnum() else "_" for ch in name)
    frame = open_frame(entry, chain_args(defn))
    kb = frame.kb
    kb.maxnreg = maxnreg
    ops = load_operands(frame, defn)
    regs = []
    for j in range(chains):
        r = seed_chain(frame, defn, j)
        r.update(ops)
        regs.append(r)
    frame.begin_loop()
    emitted = 0
    for _ in range(rounds):
        for j in range(chains):
            emitted += emit_round(kb, defn, regs[j], targets=targets)
    frame.end_loop()
    values = [(regs[j][n], cls) for j in range(chains) for n, cls, _ in defn.state]
    frame.finish(values, guarded=[frame.live])
    per_round_targets = defn.targets_per_round
    n_targets = chains * rounds * per_round_targets
    checks: list[SassCheck] = []
    for regex, per_target in defn.sass:
        carrier_check = regex == "IMAD$" and defn.template == "carrier"
        if not targets and not carrier_check and not (defn.template == "carrier" and regex.startswith("MUFU\\.EX2")):
            continue
        if carrier_check or (defn.template == "carrier" and not targets):
            count = chains * rounds
        else:
            count = math.floor(per_target * n_targets)
        checks.append(SassCheck(regex, max(1, count)))
    if not checks:
        # An overhead twin with nothing left but the loop: check the liveness XOR survived.
        checks.append(SassCheck("LOP3\\.LUT", 1))
    ops_count = float(emitted) if targets else 0.0
    work = Work(
        unit=unit or (defn.unit if targets else "overhead"),
        ops=ops_count,
        flops=ops_count * defn.flops_per_target,
    )
    ref = defn.ref if targets else defn.overhead_ref
    words = frame.words
    return KernelSpec(
        name=name,
        group=group,
        description=description or defn.title,
        ptx=frame.ptx(),
        entry=entry,
        args=tuple(frame.args),
        work=work,
        launch=launch,
        sass=tuple(checks),
        verify=_chain_verify(defn, chains, rounds, ref, words),
        out_dtypes={"out": "uint32"},
        spec_key=spec_key if targets else None,
        sweep=sweep,
        tags=tags,
        # The overhead twin carries its instruction's needs: the pair runs, or is skipped, together.
        min_cc=defn.min_cc,
        min_ptx=defn.min_ptx,
    )
