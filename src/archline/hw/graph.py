"""CUDA graphs of a program's step: capture one call, list its kernel nodes, replay it with nodes switched off.

PyTorch's capture (``torch.cuda.CUDAGraph(keep_graph=True)``) gives the graph and its
executable; the driver's ``cuGraphNodeSetEnabled`` then switches kernel, copy and memset nodes
of the executable on and off between replays (cuda-bindings). Node enable flags change only
what the GPU runs: a disabled kernel leaves its output buffers as the last replay left them,
and the kernels after it read those stale values (docs/replay.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from archline.errors import ArchlineError, InputError

__all__ = ["GraphNode", "TorchGraph", "capture_torch"]


class GraphError(ArchlineError):
    """A step that cannot be captured or replayed as a CUDA graph (one line, exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class GraphNode:
    """One node of a captured graph that can be switched off: its position, kind and kernel name."""

    index: int
    kind: str  # kernel, memcpy, memset
    name: str


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _check(res: Any, what: str) -> Any:
    """cuda-bindings returns (error, values...): raise on error, else the values."""
    err, *rest = res if isinstance(res, tuple) else (res,)
    d = _driver()
    if int(err) != int(d.CUresult.CUDA_SUCCESS):
        _, msg = d.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise GraphError(f"{what}: CUDA error {int(err)} ({text})")
    return rest[0] if len(rest) == 1 else tuple(rest)


def _nodes(graph: Any) -> tuple[list[Any], list[GraphNode]]:
    d = _driver()
    _, n = _check(d.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    handles, _ = _check(d.cuGraphGetNodes(graph, n), "cuGraphGetNodes")
    kinds = {
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL: "kernel",
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY: "memcpy",
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET: "memset",
    }
    keep: list[Any] = []
    out: list[GraphNode] = []
    for h in handles:
        kind = kinds.get(_check(d.cuGraphNodeGetType(h), "cuGraphNodeGetType"))
        if kind is None:
            continue  # event, host, empty or child-graph nodes cannot be switched off
        name = kind
        if kind == "kernel":
            params = _check(d.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
            raw = _check(d.cuFuncGetName(params.func), "cuFuncGetName")
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        out.append(GraphNode(len(out), kind, name))
        keep.append(h)
    return keep, out


class TorchGraph:
    """One captured PyTorch step, replayable with any subset of its nodes enabled."""

    def __init__(self, graph: Any, device: int) -> None:
        import torch

        self._torch = torch
        self._g = graph
        self.device = device
        d = _driver()
        self._graph = d.CUgraph(int(graph.raw_cuda_graph()))
        self._exec = d.CUgraphExec(int(graph.raw_cuda_graph_exec()))
        self._handles, self.nodes = _nodes(self._graph)
        self._enabled = [True] * len(self.nodes)

    def set_enabled(self, indices: Sequence[int] | None) -> None:
        """Enable exactly the nodes in ``indices`` (None: every node)."""
        want = set(range(len(self.nodes)) if indices is None else indices)
        d = _driver()
        for i, h in enumerate(self._handles):
            on = i in want
            if on != self._enabled[i]:
                _check(d.cuGraphNodeSetEnabled(self._exec, h, 1 if on else 0), "cuGraphNodeSetEnabled")
                self._enabled[i] = on

    def replay(self) -> None:
        self._g.replay()

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self.device)


def capture_torch(step: Callable[[], Any], device: int = 0, warmup: int = 3) -> TorchGraph:
    """Capture one call of ``step`` (PyTorch work on ``device``) as a CUDA graph.

    The step runs ``warmup`` times on a side stream first (allocations, cuDNN/cuBLAS choices),
    as PyTorch's capture requires. A step that synchronises with the host or changes shapes
    cannot be captured: that is a one-line :class:`GraphError`.
    """
    try:
        import torch
    except ImportError:
        raise InputError("graph replay of a PyTorch step needs PyTorch") from None
    torch.cuda.set_device(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            step()
        if hasattr(g, "instantiate"):
            g.instantiate()
        g.replay()
        torch.cuda.synchronize(device)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphError(f"the step cannot be captured as a CUDA graph: {first}") from None
    return TorchGraph(g, device)
