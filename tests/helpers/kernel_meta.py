"""Which chain and which target instructions stand behind each catalogue kernel (for the tests)."""

from __future__ import annotations

from archline.characterize.kernels.arithmetic import ARITH_TABLE
from archline.characterize.kernels.chains import ChainDef
from archline.characterize.kernels.instructions import instruction_chain
from archline.core.kernel import KernelSpec

_ARITH = {e.name: e.chain for e in ARITH_TABLE}


def chain_of(spec: KernelSpec) -> tuple[ChainDef, bool] | None:
    """(chain definition, targets emitted?) for arithmetic and instruction kernels, else None."""
    if spec.group == "arithmetic":
        key = next(v for k, v in _ARITH.items() if spec.name == k or spec.name.startswith(k + "."))
        return instruction_chain(key), True
    if spec.group == "instruction":
        parts = spec.name.removeprefix("inst.").split(".")
        overhead = parts[-1] == "overhead"
        if overhead:
            parts = parts[:-1]
        return instruction_chain(".".join(parts[:-1])), not overhead
    return None


def target_opcodes(spec: KernelSpec) -> tuple[str, ...]:
    """PTX opcodes whose executions Work.ops counts."""
    chain = chain_of(spec)
    if chain is not None:
        defn, _ = chain
        return tuple(sorted({t.split()[0] for t, is_target in defn.body if is_target}))
    n = spec.name
    if n.startswith("roofline."):
        return ("fma.rn.f32", "fma.rn.f64")
    if n.startswith(("mem.dram.read", "mem.dram.coalesce", "mem.l2", "mem.l1", "mem.dram.copy", "mem.dram.size")):
        return (
            "ld.global.u32",
            "ld.global.u8",
            "ld.global.u16",
            "ld.global.v2.u32",
            "ld.global.v4.u32",
            "ld.global.cg.v4.u32",
            "ld.global.ca.v4.u32",
        )
    if n.startswith("operand.ffma."):
        return ("fma.rn.f32",)
    if n == "mem.dram.write":
        return ("st.global.v4.u32",)
    if n.startswith("mem.shared.write"):
        return ("st.volatile.shared.u32",)
    if n.startswith("mem.shared"):
        return ("ld.shared.u32",)
    if n.startswith("mem.const"):
        return ("ld.const.u32",)
    if n == "sync.bar":
        return ("bar.sync",)
    if n.startswith("sync.atomic.global"):
        return ("red.global.add.u32",)
    if n.startswith("sync.atomic.shared"):
        return ("red.shared.add.u32",)
    raise KeyError(n)


def exact_result(spec: KernelSpec) -> bool:
    """True if verify reproduces the kernel's result words exactly (no range-only check)."""
    if "operand" in spec.tags:
        return False  # random-operand kernels are checked for liveness and a bound, not bit for bit
    chain = chain_of(spec)
    if chain is None:
        return True
    defn, targets = chain
    return (defn.ref if targets else defn.overhead_ref).exact
