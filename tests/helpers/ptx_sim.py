"""A small SIMT interpreter for the PTX subset archline's generators emit, vectorised over threads.

It runs a KernelSpec's PTX on the CPU for a tiny launch, fills buffers the way the runner does,
and returns the copied-back outputs plus dynamic instruction counts. The tests use it to check,
independently of each kernel's own host reference, that verify accepts what the code really
computes and that Work matches the instructions actually executed. Approximate instructions
(sin.approx, ex2.approx …) use numpy's correctly rounded functions.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.kernel import KernelSpec
from tests.helpers.ptx_sim_alu import _TYPES, SimError, alu

A = NDArray[Any]

_STORE: dict[str, Any] = {"%rd": np.uint64, "%r": np.uint32, "%fd": np.float64, "%f": np.float32, "%h": np.uint16}
_GLOBAL_SHIFT = 40
_CONST_BASE = 1 << 56


def _reg_dtype(name: str) -> Any:
    for pre in ("%rd", "%fd", "%r", "%f", "%h"):
        if name.startswith(pre) and name[len(pre) :].isdigit():
            return _STORE[pre]
    if name.startswith("%p"):
        return np.bool_
    raise SimError(f"unknown register {name}")


@dataclass
class SimResult:
    outputs: dict[str, NDArray[np.generic]]
    scalars: dict[str, float | int]
    counts: Counter[str] = field(default_factory=Counter)
    sectors: int = 0
    global_bytes: int = 0


class _Thread:
    """State of the whole grid (every array has one element per thread)."""

    def __init__(self, n: int, block: int, grid: int) -> None:
        self.n = n
        self.regs: dict[str, A] = {}
        self.block = block
        g = np.arange(n, dtype=np.uint32)
        self.special = {
            "%tid.x": g % np.uint32(block),
            "%ctaid.x": g // np.uint32(block),
            "%ntid.x": np.full(n, block, np.uint32),
            "%nctaid.x": np.full(n, grid, np.uint32),
        }
        self.carry = np.zeros(n, np.uint64)


def _parse_imm(tok: str, dtype: Any) -> Any:
    if tok.startswith("0f") and len(tok) == 10:
        return struct.unpack(">f", bytes.fromhex(tok[2:]))[0]
    if tok.startswith("0d") and len(tok) == 18:
        return struct.unpack(">d", bytes.fromhex(tok[2:]))[0]
    return int(tok, 0)


class PtxSim:
    """Parse one module and run its single entry."""

    def __init__(self, ptx: str) -> None:
        self.params: list[tuple[str, str]] = []
        self.shared: dict[str, tuple[int, int]] = {}
        self.consts: dict[str, tuple[int, A]] = {}
        self.code: list[str] = []
        self.labels: dict[str, int] = {}
        shared_top = 256
        in_body = False
        for raw in ptx.splitlines():
            line = raw.strip()
            if not line or line.startswith("//"):
                continue
            if line.startswith(".shared") and not in_body:
                m = re.search(r"(\w+)\[(\d+)\]", line)
                assert m
                size = int(m.group(2)) * 4
                self.shared[m.group(1)] = (shared_top, size)
                shared_top += (size + 255) // 256 * 256
                continue
            if line.startswith(".const") and not in_body:
                m = re.search(r"(\w+)\[(\d+)\]\s*=\s*\{([^}]*)\}", line)
                assert m
                vals = np.array([int(v) for v in m.group(3).split(",")], dtype=np.uint32)
                self.consts[m.group(1)] = (_CONST_BASE + len(self.consts) * (1 << 20), vals)
                continue
            if line.startswith(".param"):
                _, kind, name = line.rstrip(",").split()
                self.params.append((name, kind.lstrip(".")))
                continue
            if line == "{":
                in_body = True
                continue
            if not in_body or line == "}" or line.startswith(".reg"):
                continue
            if line.endswith(":"):
                self.labels[line[:-1]] = len(self.code)
                continue
            self.code.append(line.rstrip(";"))
        self.shared_bytes = shared_top

    # ------------------------------------------------------------------ operands

    def _val(self, st: _Thread, tok: str, dtype: Any) -> A:
        tok = tok.strip()
        if tok in st.special:
            return st.special[tok].astype(dtype)
        if tok.startswith("%"):
            v = st.regs.get(tok)
            if v is None:
                v = np.zeros(st.n, _reg_dtype(tok))
            if v.dtype == np.dtype(dtype):
                return v
            if v.dtype.itemsize == np.dtype(dtype).itemsize:
                return v.view(dtype)
            if np.dtype(dtype).kind == "f" or v.dtype.kind == "f":
                raise SimError(f"width mismatch reading {tok} as {np.dtype(dtype)}")
            return v.astype(np.uint64).astype(dtype)
        if tok in self.shared:
            return np.full(st.n, self.shared[tok][0], dtype)
        if tok in self.consts:
            return np.full(st.n, self.consts[tok][0], dtype)
        return np.full(st.n, _parse_imm(tok, dtype), dtype)

    def _set(self, st: _Thread, tok: str, value: A, mask: A | None) -> None:
        dt = _reg_dtype(tok)
        v = np.asarray(value)
        if v.dtype != np.dtype(dt):
            if v.dtype.itemsize == np.dtype(dt).itemsize and dt is not np.bool_:
                v = v.view(dt)
            else:
                v = v.astype(np.uint64).astype(dt) if v.dtype.kind in "iu" else v.astype(dt)
        v = np.broadcast_to(v, (st.n,)).copy()
        if mask is not None and tok in st.regs:
            v = np.where(mask, v, st.regs[tok])
        st.regs[tok] = v

    # ------------------------------------------------------------------ execution

    def run(
        self,
        spec: KernelSpec,
        *,
        iters: int,
        sm_count: int = 1,
        grid: int | None = None,
        block: int | None = None,
        rng_seed: int = 1,
    ) -> SimResult:
        grid = grid or spec.launch.grid_for(sm_count)
        block = block or spec.launch.block
        n = grid * block
        st = _Thread(n, block, grid)
        rng = np.random.default_rng(rng_seed)
        self.buffers: list[NDArray[np.uint8]] = []
        names: dict[str, int] = {}
        scalars: dict[str, float | int] = {"grid": grid, "block": block, "threads": n}
        values: dict[str, Any] = {}
        for arg in spec.args:
            if arg.kind == "ptr":
                nb = arg.nbytes(n)
                buf = _fill(arg.init, nb, rng)
                names[arg.name] = len(self.buffers)
                values[arg.name] = (len(self.buffers) + 1) << _GLOBAL_SHIFT
                self.buffers.append(buf)
            elif arg.role == "iters":
                values[arg.name] = iters
                scalars[arg.name] = iters
            else:
                assert arg.value is not None
                values[arg.name] = arg.value
                scalars[arg.name] = arg.value
        self.param_values = {f"{spec.entry}_{k}": v for k, v in values.items()}
        self.smem = np.zeros((grid, max(self.shared_bytes, 4)), np.uint8)
        self.block_of = (np.arange(n) // block).astype(np.int64)
        res = SimResult(outputs={}, scalars=scalars)
        pc = 0
        steps = 0
        while pc < len(self.code):
            steps += 1
            if steps > 50_000_000:
                raise SimError("runaway loop")
            jump = self._exec(st, self.code[pc], res)
            if jump == "ret":
                break
            pc = self.labels[jump] if jump else pc + 1
        for arg in spec.args:
            if arg.kind == "ptr" and arg.role in ("out", "inout"):
                dt = np.dtype(spec.out_dtypes.get(arg.name, "uint8"))
                res.outputs[arg.name] = self.buffers[names[arg.name]].view(dt).copy()
        return res

    def _exec(self, st: _Thread, line: str, res: SimResult) -> str | None:
        mask: A | None = None
        if line.startswith("@"):
            pred, line = line.split(None, 1)
            neg = pred.startswith("@!")
            p = st.regs[pred.lstrip("@!")]
            mask = ~p if neg else p
        op, _, rest = line.partition(" ")
        ops = _split(rest)
        parts = op.split(".")
        base = parts[0]
        active = st.n if mask is None else int(np.count_nonzero(mask))
        res.counts[op] += active
        if base == "ret":
            return "ret"
        if base == "bra":
            if mask is None:
                return ops[0]
            if mask.all():
                return ops[0]
            if not mask.any():
                return None
            raise SimError(f"divergent branch: {line}")
        if base == "bar":
            return None
        if base in ("ld", "st", "red"):
            self._memory(st, base, parts, ops, mask, res)
            return None
        if base == "mov":
            self._mov(st, parts, ops, mask)
            return None
        self._set(st, ops[0], alu(lambda tok, dt: self._val(st, tok, dt), st, parts, ops), mask)
        return None

    def _mov(self, st: _Thread, parts: list[str], ops: list[str], mask: A | None) -> None:
        d, s = ops
        ty = parts[-1]
        if s.startswith("{"):
            items = [x.strip() for x in s.strip("{}").split(",")]
            width = 16 if items[0].startswith("%h") else 32
            acc = np.zeros(st.n, np.uint64)
            for i, it in enumerate(items):
                piece = self._val(st, it, np.uint16 if width == 16 else np.uint32).astype(np.uint64)
                acc |= piece << np.uint64(i * width)
            self._set(st, d, acc.astype(_TYPES[ty]), mask)
            return
        if d.startswith("{"):
            items = [x.strip() for x in d.strip("{}").split(",")]
            v = self._val(st, s, _TYPES[ty]).view(np.uint64 if ty == "b64" else np.uint32).astype(np.uint64)
            width = 64 // len(items) if ty == "b64" else 32 // len(items)
            for i, it in enumerate(items):
                self._set(st, it, (v >> np.uint64(i * width)) & np.uint64((1 << width) - 1), mask)
            return
        self._set(st, d, self._val(st, s, _TYPES[ty]), mask)

    # ------------------------------------------------------------------ memory

    def _addr(self, st: _Thread, tok: str, space: str) -> A:
        inner = tok.strip()[1:-1]
        reg, _, off = inner.partition("+")
        dt = np.uint32 if space == "shared" and not reg.startswith("%rd") else np.uint64
        return self._val(st, reg, dt).astype(np.uint64) + np.uint64(int(off or 0))

    def _memory(self, st: _Thread, base: str, parts: list[str], ops: list[str], mask: A | None, res: SimResult) -> None:
        space = parts[1] if parts[1] != "volatile" else parts[2]
        ty = parts[-1]
        vec = next((int(p[1:]) for p in parts if p in ("v2", "v4")), 1)
        if base == "ld" and space == "param":
            name = ops[1].strip("[]")
            self._set(st, ops[0], np.full(st.n, self.param_values[name], dtype=_TYPES[ty]), mask)
            return
        width = np.dtype(_TYPES[ty]).itemsize
        addr_tok = ops[1] if base == "ld" else ops[0]
        addr = self._addr(st, addr_tok, space)
        sel = np.ones(st.n, bool) if mask is None else mask
        if space == "global":
            buf_idx = (addr >> np.uint64(_GLOBAL_SHIFT)) - np.uint64(1)
            ids = np.unique(buf_idx[sel])
            if ids.size > 1:
                raise SimError("one instruction touched two buffers")
            mem = self.buffers[int(ids[0])] if ids.size else self.buffers[0]
            off = (addr & np.uint64((1 << _GLOBAL_SHIFT) - 1)).astype(np.int64)
            self._account(res, off[sel], width * vec, base)
        elif space == "shared":
            mem = self.smem.reshape(-1)
            off = self.block_of * self.smem.shape[1] + addr.astype(np.int64)
        elif space == "const":
            key = next(k for k, (b, _) in self.consts.items() if int(addr[0]) >> 20 == b >> 20)
            table = self.consts[key][1]
            idx = ((addr - np.uint64(self.consts[key][0])) // np.uint64(4)).astype(np.int64)
            self._set(st, ops[0], table[idx], mask)
            return
        else:
            raise SimError(f"unsupported space {space}")
        if (off[sel] < 0).any() or (off[sel] + width * vec > mem.size).any():
            raise SimError(f"{base}.{space} out of bounds")
        view_dt = _TYPES[ty]
        if base == "red":
            v = self._val(st, ops[1], np.uint32)
            words = mem.view(np.uint32)
            with np.errstate(over="ignore"):
                np.add.at(words, off[sel] // 4, v[sel])
            return
        if base == "ld":
            items = [x.strip() for x in ops[0].strip("{}").split(",")]
            for i, it in enumerate(items):
                o = off + i * width
                raw = np.zeros(st.n, view_dt)
                raw[sel] = mem.view(view_dt)[o[sel] // width]
                self._set(st, it, raw, mask)
            return
        items = [x.strip() for x in ops[1].strip("{}").split(",")]
        for i, it in enumerate(items):
            o = off + i * width
            val = self._val(st, it, view_dt) if not it.startswith("%h") or width == 2 else self._val(st, it, np.uint16)
            mem.view(view_dt)[o[sel] // width] = np.asarray(val).astype(view_dt)[sel]

    def _account(self, res: SimResult, off: A, size: int, base: str) -> None:
        res.global_bytes += int(off.size) * size
        # 32-byte sectors touched per warp instruction (threads are consecutive in warps of 32).
        for w0 in range(0, off.size, 32):
            chunk = off[w0 : w0 + 32]
            res.sectors += len(set((chunk // 32).tolist()) | set(((chunk + size - 1) // 32).tolist()))


def _split(rest: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _fill(init: str, nbytes: int, rng: np.random.Generator) -> NDArray[np.uint8]:
    words = (nbytes + 7) // 4
    if init == "zeros":
        arr = np.zeros(words, np.uint32)
    elif init == "iota_u32":
        arr = np.arange(words, dtype=np.uint32)
    elif init == "random_u32":
        arr = rng.integers(0, 2**32, words, dtype=np.uint64).astype(np.uint32)
    elif init == "random_f32":
        arr = rng.uniform(1.0, 2.0, words).astype(np.float32).view(np.uint32)
    elif init == "ones_f32":
        arr = np.ones(words, np.float32).view(np.uint32)
    elif init == "ones_f64":
        arr = np.ones((words + 1) // 2, np.float64).view(np.uint32)
    else:
        raise SimError(f"unsupported init {init}")
    return arr.view(np.uint8)[:nbytes].copy()


def simulate(
    spec: KernelSpec, *, iters: int, sm_count: int = 1, grid: int | None = None, block: int | None = None
) -> SimResult:
    """Run ``spec`` on the CPU for ``iters`` trips of its outer loop."""
    return PtxSim(spec.ptx).run(spec, iters=iters, sm_count=sm_count, grid=grid, block=block)


def poisoned(outputs: Mapping[str, NDArray[np.generic]], byte: int) -> dict[str, NDArray[np.generic]]:
    """The same buffers filled with one byte value, as if the kernel never ran."""
    out: dict[str, NDArray[np.generic]] = {}
    for k, v in outputs.items():
        raw = np.full(np.asarray(v).nbytes, byte, np.uint8)
        out[k] = raw.view(np.asarray(v).dtype)
    return out
