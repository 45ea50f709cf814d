"""Offline SASS inspection: find ptxas/nvdisasm, compile PTX, count opcodes, read registers and spills."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from archline.core.kernel import KernelSpec, SassCheck
from archline.errors import BenchmarkError, CommandError

__all__ = [
    "CompiledKernel",
    "KernelSass",
    "SassInstruction",
    "check_sass",
    "compile_many",
    "compile_ptx",
    "count_opcode",
    "disassemble",
    "expected_checks",
    "find_nvdisasm",
    "find_ptxas",
    "inspect_many",
    "opcode_histogram",
    "parse_sass",
]

#: Wheel folders (below site-packages) that hold ptxas or nvdisasm.
_WHEEL_BIN_DIRS = ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin", "nvidia/cuda_nvdisasm/bin", "nvidia/cu12/bin")

_COMPILE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SassInstruction:
    """One disassembled instruction: ``mnemonic`` with modifiers (``LDG.E.128``), predicate, operands."""

    offset: int
    mnemonic: str
    predicate: str
    operands: str


@dataclass(frozen=True)
class CompiledKernel:
    """What ptxas made of one PTX module for one entry: the cubin and its resource use."""

    arch: str
    opt_level: int
    cubin: bytes
    registers: int
    spill_stores_b: int
    spill_loads_b: int
    stack_frame_b: int
    shared_b: int
    log: str = field(repr=False, default="")

    @property
    def spills(self) -> bool:
        return self.spill_stores_b > 0 or self.spill_loads_b > 0


def _site_dirs() -> list[Path]:
    dirs = [Path(p) for p in sys.path if p.endswith("site-packages")]
    prefix_lib = Path(sys.prefix) / "lib"
    if prefix_lib.is_dir():
        dirs.extend(prefix_lib.glob("python3*/site-packages"))
    seen: list[Path] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return seen


def _find_tool(name: str) -> Path | None:
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    for site in _site_dirs():
        for sub in _WHEEL_BIN_DIRS:
            candidate = site / sub / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        candidate = Path(cuda_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_ptxas() -> Path | None:
    """ptxas from PATH, then the nvidia-cuda-nvcc wheel, then ``$CUDA_HOME/bin``; None if absent."""
    return _find_tool("ptxas")


def find_nvdisasm() -> Path | None:
    """nvdisasm from PATH, then the nvidia-cuda-nvdisasm wheel, then ``$CUDA_HOME/bin``; None if absent."""
    return _find_tool("nvdisasm")


def _require(tool: Path | None, name: str, wheel: str) -> Path:
    if tool is None:
        raise CommandError(f"{name} not found on PATH, in the {wheel} wheel or in $CUDA_HOME/bin")
    return tool


_cache: dict[str, CompiledKernel] = {}
_cache_lock = threading.Lock()

_RE_REGS = re.compile(r"Used (\d+) registers")
_RE_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_RE_STACK = re.compile(r"(\d+) bytes stack frame")
_RE_SMEM = re.compile(r"(\d+) bytes smem")


def _cache_key(ptx: str, arch: str, opt_level: int) -> str:
    h = hashlib.sha256(ptx.encode())
    h.update(f"|{arch}|{opt_level}".encode())
    return h.hexdigest()


def compile_ptx(ptx: str, *, arch: str = "sm_90", opt_level: int = 3, ptxas: Path | None = None) -> CompiledKernel:
    """Assemble ``ptx`` with ``ptxas -arch=<arch> -O<opt_level> -v``; cached by PTX hash in this process.

    Raises :class:`CommandError` if ptxas is missing and :class:`BenchmarkError` (with ptxas's
    first error line) if the PTX does not assemble.
    """
    if opt_level not in range(5):
        raise BenchmarkError(f"ptxas optimisation level must be 0-4, not {opt_level}")
    key = _cache_key(ptx, arch, opt_level)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    tool = _require(ptxas or find_ptxas(), "ptxas", "nvidia-cuda-nvcc")
    with tempfile.TemporaryDirectory(prefix="archline-ptx-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        dst = Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        cmd = [str(tool), f"-arch={arch}", f"-O{opt_level}", "-v", str(src), "-o", str(dst)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S, check=False)
        except OSError as exc:
            raise CommandError(f"cannot run {tool}: {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise BenchmarkError(f"ptxas took longer than {_COMPILE_TIMEOUT_S:.0f} s") from None
        log = proc.stdout + proc.stderr
        if proc.returncode != 0 or not dst.is_file():
            first = next((ln for ln in log.splitlines() if "error" in ln.lower()), log.strip()[:200])
            raise BenchmarkError(f"ptxas -O{opt_level} failed: {first.replace(str(src), 'kernel.ptx')}")
        cubin = dst.read_bytes()
    regs = _RE_REGS.search(log)
    spill = _RE_SPILL.search(log)
    stack = _RE_STACK.search(log)
    smem = _RE_SMEM.search(log)
    compiled = CompiledKernel(
        arch=arch,
        opt_level=opt_level,
        cubin=cubin,
        registers=int(regs.group(1)) if regs else 0,
        spill_stores_b=int(spill.group(1)) if spill else 0,
        spill_loads_b=int(spill.group(2)) if spill else 0,
        stack_frame_b=int(stack.group(1)) if stack else 0,
        shared_b=int(smem.group(1)) if smem else 0,
        log=log,
    )
    with _cache_lock:
        _cache[key] = compiled
    return compiled


def compile_many(
    ptxs: Sequence[str], *, arch: str = "sm_90", opt_level: int = 3, jobs: int | None = None
) -> list[CompiledKernel]:
    """Compile several modules in parallel (ptxas runs as a child process, so threads suffice)."""
    workers = jobs or min(8, (os.cpu_count() or 2) + 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: compile_ptx(p, arch=arch, opt_level=opt_level), ptxs))


_RE_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def parse_sass(text: str) -> list[SassInstruction]:
    """Parse ``nvdisasm -c`` output into instructions (labels, directives and comments skipped)."""
    out: list[SassInstruction] = []
    for line in text.splitlines():
        m = _RE_INSTR.search(line)
        if m:
            pred = (m.group(2) or "").strip()
            out.append(SassInstruction(int(m.group(1), 16), m.group(3), pred, m.group(4).strip()))
    return out


def disassemble(compiled: CompiledKernel, *, nvdisasm: Path | None = None) -> list[SassInstruction]:
    """Disassemble a cubin's code sections with ``nvdisasm -c``."""
    tool = _require(nvdisasm or find_nvdisasm(), "nvdisasm", "nvidia-cuda-nvdisasm")
    with tempfile.TemporaryDirectory(prefix="archline-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(compiled.cubin)
        try:
            proc = subprocess.run([str(tool), "-c", str(path)], capture_output=True, text=True, check=False)
        except OSError as exc:
            raise CommandError(f"cannot run {tool}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise BenchmarkError(
            f"nvdisasm failed: {proc.stderr.strip().splitlines()[0] if proc.stderr else proc.returncode}"
        )
    return parse_sass(proc.stdout)


def count_opcode(instrs: Iterable[SassInstruction], pattern: str) -> int:
    """How many instructions' mnemonics match ``pattern`` (``re.match``, anchored at the start)."""
    rx = re.compile(pattern)
    return sum(1 for ins in instrs if rx.match(ins.mnemonic))


def opcode_histogram(instrs: Iterable[SassInstruction]) -> Counter[str]:
    """Mnemonic → count, for reports and debugging."""
    return Counter(ins.mnemonic for ins in instrs)


def check_sass(spec: KernelSpec, instrs: Sequence[SassInstruction]) -> list[str]:
    """Each failed :class:`SassCheck` of ``spec`` as a one-line reason (empty when all hold)."""
    failures: list[str] = []
    for chk in spec.sass:
        n = count_opcode(instrs, chk.opcode)
        if n < chk.min_count or (chk.max_count is not None and n > chk.max_count):
            bound = f">= {chk.min_count}" if chk.max_count is None else f"{chk.min_count}..{chk.max_count}"
            failures.append(f"{spec.name}: {n} x {chk.opcode!r} in SASS, expected {bound}")
    return failures


def expected_checks(checks: Sequence[SassCheck]) -> str:
    """Checks as ``OPCODE>=n`` text, for docs and reports."""
    return ", ".join(
        f"{c.opcode}>={c.min_count}" if c.max_count is None else f"{c.opcode} in [{c.min_count},{c.max_count}]"
        for c in checks
    )


# --------------------------------------------------------------------------- bundled inspection


@dataclass(frozen=True)
class KernelSass:
    """ptxas's resource use and the disassembly of one entry."""

    entry: str
    registers: int
    spill_stores_b: int
    spill_loads_b: int
    stack_frame_b: int
    instructions: tuple[SassInstruction, ...]

    @property
    def spills(self) -> bool:
        return self.spill_stores_b > 0 or self.spill_loads_b > 0


_RE_ENTRY = re.compile(r"\.entry\s+(\w+)")
_RE_SYMBOL = re.compile(r"^\.(?:shared|const|global)\b[^;]*?(\w+)\s*\[", re.MULTILINE)
_RE_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_RE_SECTION = re.compile(r"\.section\s+\.text\.(\w+),")
_HEADER = (".version", ".target", ".address_size")
_inspect_cache: dict[str, KernelSass] = {}

#: Kernels per ptxas/nvdisasm run: nvdisasm costs ~0.4 s to start, so one run per bundle
#: rather than per kernel keeps a few hundred kernels within seconds.
BUNDLE = 48


def _body(ptx: str) -> str:
    return "\n".join(ln for ln in ptx.splitlines() if not ln.lstrip().startswith(_HEADER))


def _header(ptx: str) -> str:
    return "\n".join(ln for ln in ptx.splitlines() if ln.lstrip().startswith(_HEADER))


def _bundles(ptxs: Sequence[str]) -> list[list[int]]:
    """Group modules so that no bundle repeats an entry or module-scope symbol name."""
    out: list[list[int]] = []
    names: list[set[str]] = []
    for i, ptx in enumerate(ptxs):
        mine = set(_RE_ENTRY.findall(ptx)) | set(_RE_SYMBOL.findall(ptx))
        for b, used in zip(out, names, strict=True):
            if len(b) < BUNDLE and not (used & mine) and _header(ptxs[b[0]]) == _header(ptx):
                b.append(i)
                used |= mine
                break
        else:
            out.append([i])
            names.append(set(mine))
    return out


def _resources(log: str) -> dict[str, tuple[int, int, int, int]]:
    """entry -> (registers, spill stores, spill loads, stack frame) from ``ptxas -v``."""
    res: dict[str, list[int]] = {}
    cur = ""
    for line in log.splitlines():
        m = _RE_FUNC.search(line)
        if m:
            cur = m.group(1)
            res[cur] = [0, 0, 0, 0]
            continue
        if not cur:
            continue
        if (r := _RE_REGS.search(line)) is not None:
            res[cur][0] = int(r.group(1))
        if (sp := _RE_SPILL.search(line)) is not None:
            res[cur][1], res[cur][2] = int(sp.group(1)), int(sp.group(2))
        if (st := _RE_STACK.search(line)) is not None:
            res[cur][3] = int(st.group(1))
    return {k: (v[0], v[1], v[2], v[3]) for k, v in res.items()}


def _split_functions(text: str) -> dict[str, list[SassInstruction]]:
    funcs: dict[str, list[SassInstruction]] = {}
    cur: list[SassInstruction] | None = None
    for line in text.splitlines():
        m = _RE_SECTION.search(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        if cur is not None:
            cur.extend(parse_sass(line))
    return funcs


def _inspect_bundle(ptxs: Sequence[str], arch: str, opt_level: int) -> list[KernelSass]:
    # Architecture-specific PTX (``.target sm_90a``) assembles for that exact target only.
    specific = re.search(r"\.target\s+(sm_\d+a)\b", _header(ptxs[0]))
    if specific and specific.group(1)[:-1] == arch:
        arch = specific.group(1)
    merged = "\n".join([_header(ptxs[0]), *(_body(p) for p in ptxs)])
    try:
        compiled = compile_ptx(merged, arch=arch, opt_level=opt_level)
    except BenchmarkError:
        if len(ptxs) == 1:
            raise
        # Find the module at fault so the message names its kernel.
        for p in ptxs:
            try:
                compile_ptx(p, arch=arch, opt_level=opt_level)
            except BenchmarkError as exc:
                entry = (_RE_ENTRY.findall(p) or ["?"])[0]
                raise BenchmarkError(f"{entry}: {exc}") from None
        raise
    tool = _require(find_nvdisasm(), "nvdisasm", "nvidia-cuda-nvdisasm")
    with tempfile.TemporaryDirectory(prefix="archline-sass-") as tmp:
        path = Path(tmp) / "bundle.cubin"
        path.write_bytes(compiled.cubin)
        proc = subprocess.run([str(tool), "-c", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchmarkError(f"nvdisasm failed: {proc.stderr.strip()[:200]}")
    funcs = _split_functions(proc.stdout)
    res = _resources(compiled.log)
    out: list[KernelSass] = []
    for p in ptxs:
        entry = _RE_ENTRY.findall(p)[0]
        regs, sst, sld, stack = res.get(entry, (0, 0, 0, 0))
        out.append(KernelSass(entry, regs, sst, sld, stack, tuple(funcs.get(entry, ()))))
    return out


def inspect_many(
    ptxs: Sequence[str], *, arch: str = "sm_90", opt_level: int = 3, jobs: int | None = None
) -> list[KernelSass]:
    """Registers, spills and SASS of many single-entry modules, compiled and disassembled in
    bundles (in parallel) and cached by PTX hash for the rest of the process."""
    keys = [_cache_key(p, arch, opt_level) for p in ptxs]
    todo: dict[str, str] = {}
    for k, p in zip(keys, ptxs, strict=True):
        if k not in _inspect_cache and k not in todo:
            todo[k] = p
    if todo:
        items = list(todo.items())
        groups = _bundles([p for _, p in items])
        workers = jobs or min(8, (os.cpu_count() or 2) + 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(lambda g: _inspect_bundle([items[i][1] for i in g], arch, opt_level), groups))
        for g, res in zip(groups, results, strict=True):
            for i, r in zip(g, res, strict=True):
                _inspect_cache[items[i][0]] = r
    return [_inspect_cache[k] for k in keys]
