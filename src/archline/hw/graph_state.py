"""The tensors a captured PyTorch step updates (weights, gradients, optimizer state): snapshot, restore, check.

A training step replayed as a CUDA graph keeps updating its weights; replayed with nodes switched off
it updates them from whatever the switched-off nodes left behind, and within a few hundred replays the
weights are NaN (``benchmarks/replay_data_check.py``: every weight of ResNet-50 and of a transformer, on
an H100). Tensor cores and the memory system draw less power on such operands, so every energy measured
after that is not the program's. Graph replay therefore snapshots the step's state once, right after
capture, and copies it back before every measurement, after every repetition (with a check of
whether it was still finite) and, in replays with nodes switched off, before every replay.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_FREE_FRACTION", "StepState", "step_tensors"]

#: The snapshot may take at most this share of the GPU's free memory; a larger state is not guarded.
MAX_FREE_FRACTION = 0.25


def step_tensors(step: Callable[..., Any] | Any, device: int, depth: int = 3) -> list[Any]:
    """The CUDA tensors on ``device`` that ``step`` (or any object: a list of modules and optimizers)
    reaches: through its closure, the module globals it names, its defaults, its bound object, a
    ``functools.partial``'s arguments, and containers and plain objects (a trainer) up to ``depth`` deep.
    A module gives its parameters, their gradients and its buffers; an optimizer its parameters, their
    gradients, its state and any tensor in its parameter groups (a captured learning rate)."""
    import torch

    found: dict[tuple[int, int, Any], Any] = {}
    seen: set[int] = set()

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor) and t.is_cuda and t.device.index == device and t.numel() > 0:
            d = t.detach()
            if d.layout == torch.strided:
                found.setdefault((d.data_ptr(), d.numel(), d.dtype), d)

    def add_param(p: Any) -> None:
        add(p)
        if getattr(p, "grad", None) is not None:
            add(p.grad)

    def visit(obj: Any, left: int) -> None:
        if left < 0 or id(obj) in seen or isinstance(obj, type | types.ModuleType | str | bytes | int | float):
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            add_param(obj)
        elif isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                add_param(p)
            for b in obj.buffers():
                add(b)
            for k, v in vars(obj).items():  # an optimizer or scaler kept as a plain attribute (a trainer module)
                if k not in ("_parameters", "_buffers", "_modules") and not k.startswith("_"):
                    visit(v, left - 1)
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                for p in group.get("params", ()):
                    add_param(p)
                for v in group.values():
                    add(v)
            for st in obj.state.values():
                for v in st.values() if isinstance(st, dict) else ():
                    add(v)
        elif isinstance(obj, list | tuple | set | frozenset):
            for v in obj:
                visit(v, left - 1)
        elif isinstance(obj, dict):
            for v in obj.values():
                visit(v, left - 1)
        elif isinstance(obj, functools.partial):
            visit(obj.func, left)
            visit(obj.args, left)
            visit(obj.keywords, left)
        elif isinstance(obj, types.MethodType):
            visit(obj.__func__, left)
            visit(obj.__self__, left - 1)
        elif isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, left - 1)
                except ValueError:  # an empty cell
                    continue
            # a script's step often uses its module's globals (model, opt), and defaults can hold them too
            g = obj.__globals__
            for name in obj.__code__.co_names:
                if name in g:
                    visit(g[name], left - 1)
            visit(obj.__defaults__ or (), left)
            visit(obj.__kwdefaults__ or {}, left)
        elif hasattr(obj, "__dict__"):
            for v in vars(obj).values():
                visit(v, left - 1)

    visit(step, depth)
    return list(found.values())


def _storages(tensors: list[Any]) -> list[Any]:
    """One byte tensor over each distinct storage of ``tensors`` (in first-seen order); where a storage cannot be
    viewed so, the tensors themselves (as before: a view shared by two of them is then copied twice)."""
    import torch

    out: dict[int, Any] = {}
    try:
        for t in tensors:
            st = t.untyped_storage()
            if st.data_ptr() not in out:
                out[st.data_ptr()] = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
    except (RuntimeError, TypeError, AttributeError):
        return list(tensors)
    return list(out.values())


class StepState:
    """A snapshot of a step's tensors; :meth:`restore` copies it back and says whether they were all finite.

    ``tensors`` empty, or a snapshot over :data:`MAX_FREE_FRACTION` of free memory, guards nothing
    (:attr:`guarded` False, :attr:`why` says why); then :meth:`restore` does nothing and returns True.
    """

    def __init__(self, tensors: list[Any], device: int, max_free_fraction: float = MAX_FREE_FRACTION) -> None:
        import torch

        self._torch = torch
        self.count = len(tensors)
        # Copied whole storage by whole storage, each once: views of one buffer (a flat parameter and its
        # views, two slices of one tensor) are neither cloned twice nor lost to each other.
        targets = _storages(tensors)
        self.nbytes = int(sum(t.numel() * t.element_size() for t in targets))
        self.restores = 0
        self.nonfinite = 0
        self._dst: list[Any] = []
        self._src: list[Any] = []
        self._floats: list[Any] = []
        self.why = ""
        if not tensors:
            self.why = "no tensor of the step was found (closure, bound object, partial arguments)"
            return
        free, _ = torch.cuda.mem_get_info(device)
        if self.nbytes > max_free_fraction * free:
            self.why = (
                f"its {self.count} tensors ({self.nbytes / 1e9:.3g} GB) exceed {max_free_fraction:.0%} of the GPU's "
                f"free memory ({free / 1e9:.3g} GB)"
            )
            return
        with torch.no_grad():
            self._src = [t.clone() for t in targets]
        self._dst = list(targets)
        self._floats = [t for t in tensors if t.is_floating_point() or t.is_complex()]

    @property
    def guarded(self) -> bool:
        return bool(self._dst)

    def finite(self) -> bool:
        """Whether every floating-point tensor of the state is finite now (synchronises)."""
        if not self._floats:
            return True
        torch = self._torch
        return bool(torch.stack([torch.isfinite(t).all() for t in self._floats]).all().item())

    def copy_back(self) -> None:
        """Enqueue the copy of the snapshot back on the current stream (no check, no synchronisation)."""
        if self._dst:
            with self._torch.no_grad():
                self._torch._foreach_copy_(self._dst, self._src)

    def restore(self) -> bool:
        """Copy the snapshot back (on the current stream); whether the state was all finite before."""
        if not self._dst:
            return True
        ok = self.finite()
        self.copy_back()
        self.restores += 1
        self.nonfinite += 0 if ok else 1
        return ok

    def summary(self) -> dict[str, Any]:
        return {"guarded": self.guarded, "tensors": self.count, "bytes": self.nbytes, "restores": self.restores,
                "nonfinite_before_restore": self.nonfinite, "why_not": self.why or None}  # fmt: skip

    def note(self) -> str:
        if not self.guarded:
            return (
                f"the step's state was not restored between replays: {self.why}; replays with nodes switched off "
                "may leave the weights non-finite, and energies measured after that are not the program's"
            )
        return (
            f"the step's state ({self.count} tensors, {self.nbytes / 1e6:.4g} MB: weights, gradients, optimizer "
            f"state, inputs) was copied back before every measurement, before every replay with nodes switched "
            f"off and after every repetition; it was non-finite before {self.nonfinite} of the {self.restores} "
            "restores that checked it (after each repetition, and before each measurement and timing)"
        )
