"""CUDA graphs of a program's step: capture one call, list its nodes, replay it with nodes switched off.

PyTorch's capture (``torch.cuda.CUDAGraph(keep_graph=True)``) gives the graph and its
executable. Nodes are switched in one of three ways (:data:`SWITCH_MODES`, tried in this order
by ``measurement.attribute.replay_switch``):

- ``toggle``: ``cuGraphNodeSetEnabled`` on PyTorch's executable, between replays;
- ``toggle+optin``: the same on an executable of our own, instantiated after every
  cluster-launched kernel's function was allowed non-portable cluster sizes and its node given
  an explicit cluster-dimension attribute; a node that refuses to be enabled again gets its
  parameters re-applied (``cuGraphExecKernelNodeSetParams``) and one more try;
- ``rebuild``: an executable per set of enabled nodes, instantiated from a clone of the graph
  in which the switched-off nodes are empty nodes that keep their edges (no node is toggled).

A switched-off node leaves its output buffers as the last replay left them, and the kernels
after it read those stale values (docs/replay.md). Everything that touches the driver is here
and in :mod:`archline.hw.graph_nodes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from archline.errors import GPUUnavailableError
from archline.hw.graph_nodes import (
    CLUSTER_ERROR,
    GraphError,
    GraphNode,
    SwitchError,
    build_without,
    check,
    cluster_opt_in,
    describe_node,
    driver,
    error_text,
    instantiate,
    list_nodes,
    restore_clusters,
)
from archline.hw.graph_state import StepState, step_tensors
from archline.hw.sync_watchdog import SyncWatchdog

__all__ = ["SWITCH_MODES", "GraphError", "GraphNode", "SwitchError", "TorchGraph", "capture_torch"]

#: Ways of switching nodes off, in the order they are tried.
SWITCH_MODES = ("toggle", "toggle+optin", "rebuild")

#: Executables kept for ``rebuild`` (a measurement alternates between a few sets of nodes).
_REBUILT_KEPT = 3


class TorchGraph:
    """One captured PyTorch step, replayable with any subset of its nodes enabled."""

    switch_modes = SWITCH_MODES

    def __init__(self, graph: Any, device: int, state: StepState | None = None) -> None:
        import torch

        self._torch = torch
        self._g = graph
        self.device = device
        #: The step's tensors, snapshot after capture (graph_state.py); None: not guarded.
        self.state = state
        d = driver()
        self._graph = d.CUgraph(int(graph.raw_cuda_graph()))
        self._torch_exec = d.CUgraphExec(int(graph.raw_cuda_graph_exec()))
        self._handles, self.nodes = list_nodes(self._graph)
        self.mode = "toggle"
        self.notes: list[str] = []
        #: Storages held for the graph's lifetime (capture_torch's ``keep_buffers``); ``kept_buffers``: whether
        #: the step was captured so (False also where keeping them ran out of memory).
        self.kept: list[Any] = []
        self.kept_buffers = False
        self._exec: Any = self._torch_exec
        self._torch_dirty = False  # a node of PyTorch's executable could not be enabled again
        self._torch_on = [True] * len(self.nodes)  # PyTorch's executable's enable flags
        self._enabled = self._torch_on  # those of the executable toggled now
        self._rebuilt: dict[frozenset[int], Any] = {}
        self._want: frozenset[int] = frozenset(range(len(self.nodes)))
        self._written: list[tuple[Any, Any]] = []  # cluster attributes written for toggle+optin
        #: Watches every :meth:`replay` launch and :meth:`synchronize` for a replay that never ends (sync_watchdog.py);
        #: None: unwatched.
        self.watchdog: SyncWatchdog | None = None

    # -- modes -----------------------------------------------------------------------------
    def set_switch_mode(self, mode: str) -> None:
        """Switch nodes the ``mode`` way from now on; every node is enabled afterwards."""
        if mode not in SWITCH_MODES:
            raise ValueError(f"unknown switch mode {mode!r}")
        self._drop_own()
        restore_clusters(self._written)  # the captured graph as PyTorch left it, for every other way
        self.mode = mode
        self._want = frozenset(range(len(self.nodes)))
        if mode == "toggle":
            if self._torch_dirty:
                raise GraphError("PyTorch's executable of the step has a node that could not be enabled again")
            self._exec = self._torch_exec
            self._enabled = self._torch_on
            self._enable_all_torch()
        elif mode == "toggle+optin":
            done = cluster_opt_in(self._handles, self.nodes, self.device, self._written)
            self.notes.append(
                f"cluster opt-in: {done['cluster_nodes']} cluster-launched kernel nodes, "
                f"{done['functions_opted_in']} functions allowed non-portable cluster sizes "
                f"({done['opt_in_failed']} refused), {done['cluster_dims_written']} node cluster dimensions written"
            )
            self._exec = self._instantiate_all()
            self._enabled = [True] * len(self.nodes)
        else:
            self._exec = None

    def _enable_all_torch(self) -> None:
        d = driver()
        for i, h in enumerate(self._handles):
            if not self._enabled[i]:
                check(d.cuGraphNodeSetEnabled(self._exec, h, 1), "cuGraphNodeSetEnabled")
                self._enabled[i] = True

    def _instantiate_all(self) -> Any:
        return instantiate(self._graph, self._handles)

    def _drop_own(self) -> None:
        d = driver()
        own = [e for e in self._rebuilt.values()]
        if self._exec is not None and self._exec is not self._torch_exec and self._exec not in own:
            own.append(self._exec)
        for e in own:
            d.cuGraphExecDestroy(e)
        self._rebuilt.clear()
        self._exec = self._torch_exec if self.mode == "toggle" else None

    def close(self) -> None:
        """Destroy the executables this object instantiated (PyTorch's own stays) and put back what it wrote."""
        self._drop_own()
        restore_clusters(self._written)

    # -- switching -------------------------------------------------------------------------
    def _toggle(self, i: int, on: bool) -> str | None:
        """Switch node i; None, or why it failed (the node then keeps its state)."""
        d = driver()
        h = self._handles[i]
        err = d.cuGraphNodeSetEnabled(self._exec, h, 1 if on else 0)
        err = err[0] if isinstance(err, tuple) else err
        if int(err) == CLUSTER_ERROR and on and self.mode == "toggle+optin" and self.nodes[i].kind == "kernel":
            params = check(d.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
            again = d.cuGraphExecKernelNodeSetParams(self._exec, h, params)
            if int(again[0] if isinstance(again, tuple) else again) == 0:
                err = d.cuGraphNodeSetEnabled(self._exec, h, 1)
                err = err[0] if isinstance(err, tuple) else err
        if int(err) == 0:
            self._enabled[i] = on
            return None
        return f"{'enable' if on else 'disable'}: {error_text(err)}"

    def set_enabled(self, indices: Sequence[int] | None) -> None:
        """Enable exactly the nodes in ``indices`` (None: every node); :class:`SwitchError` names those that
        could not be switched (the others are)."""
        want = frozenset(range(len(self.nodes)) if indices is None else indices)
        if self.mode == "rebuild":
            self._exec = self._rebuilt_exec(want)
            self._want = want
            return
        failed: dict[int, str] = {}
        for i in range(len(self.nodes)):
            on = i in want
            if on != self._enabled[i]:
                why = self._toggle(i, on)
                if why is not None:
                    failed[i] = why
                    self._torch_dirty |= on and self._exec is self._torch_exec
        self._want = want
        if failed:
            raise SwitchError(failed)

    def _rebuilt_exec(self, want: frozenset[int]) -> Any:
        exe = self._rebuilt.pop(want, None)  # kept least recently used first
        if exe is None:
            off = [i for i in range(len(self.nodes)) if i not in want]
            exe = build_without(self._graph, self._handles, off)
            if len(self._rebuilt) >= _REBUILT_KEPT:
                oldest = next(iter(self._rebuilt))
                driver().cuGraphExecDestroy(self._rebuilt.pop(oldest))
        self._rebuilt[want] = exe
        return exe

    def check_switchable(self, indices: Sequence[int]) -> dict[int, str]:
        """Which of ``indices`` cannot be switched off and on again this way, and why; every node is
        enabled afterwards. :class:`GraphError` when the mode cannot be used at all."""
        if self.mode == "rebuild":
            return self._check_rebuild(indices)
        failed: dict[int, str] = {}
        for i in indices:
            why = self._toggle(i, False)
            if why is None:
                why = self._toggle(i, True)
                if why is not None:  # stuck off: start again from a fresh executable
                    if self._exec is self._torch_exec:
                        self._torch_dirty = True
                        raise GraphError(f"node {i} of PyTorch's executable could not be enabled again ({why})")
                    driver().cuGraphExecDestroy(self._exec)
                    self._exec = self._instantiate_all()
                    self._enabled = [True] * len(self.nodes)
            if why is not None:
                failed[i] = why
        return failed

    def _check_rebuild(self, indices: Sequence[int]) -> dict[int, str]:
        """Instantiate the step with each probe set enabled (all nodes; none of ``indices``; of those only the
        cluster-launched ones): a node the driver blames is kept and the build tried again (16 times at most)."""
        failed: dict[int, str] = {}
        every = set(range(len(self.nodes)))
        none = every - set(indices)
        probes = [every, none, none | {i for i in indices if self.nodes[i].cluster_blocks > 1}]
        for base in probes:
            for _ in range(16):
                try:
                    exe = build_without(self._graph, self._handles, sorted(every - base - set(failed)))
                except SwitchError as exc:
                    failed.update(exc.failed)
                    continue
                driver().cuGraphExecDestroy(exe)
                break
            else:
                first = next(iter(failed.values()), "?")
                raise GraphError(f"rebuilding the step failed on more than 16 nodes (first: {first})")
        return failed

    # -- replay ----------------------------------------------------------------------------
    def replay(self) -> None:
        w = self.watchdog
        if w is None:
            self._launch()
            return
        w.begin()  # a launch blocks once the GPU's queue is full behind a kernel that never ends
        try:
            self._launch()
        finally:
            w.end()

    def _launch(self) -> None:
        if self._exec is self._torch_exec:
            self._g.replay()  # PyTorch's replay also advances the step's random-number offsets
            return
        if self._exec is None:
            self._exec = self._rebuilt_exec(self._want)
        stream = self._torch.cuda.current_stream(self.device).cuda_stream
        check(driver().cuGraphLaunch(self._exec, stream), "cuGraphLaunch")

    def synchronize(self) -> None:
        w = self.watchdog
        if w is None:
            self._torch.cuda.synchronize(self.device)
            return
        w.begin()  # a replay with nodes switched off can hang the GPU (sync_watchdog.py)
        try:
            self._torch.cuda.synchronize(self.device)
        finally:
            w.end()

    def reset_state(self) -> None:
        """Enqueue the copy of the step's state back from its snapshot (before a replay; nothing unguarded)."""
        if self.state is not None:
            self.state.copy_back()

    def restore_state(self) -> bool:
        """Copy the step's state back from its snapshot; whether it was all finite before (True unguarded)."""
        return True if self.state is None else self.state.restore()

    def describe(self, index: int) -> dict[str, Any]:
        """How node ``index`` launches (grid, block, cluster attributes), for reports of nodes that fail."""
        n = self.nodes[index]
        base: dict[str, Any] = {"index": index, "kind": n.kind, "name": n.name, "cluster": list(n.cluster)}
        return base if n.kind != "kernel" else {**base, **describe_node(self._handles[index])}


def _keep_alive_mode(torch: Any) -> Any:
    """A dispatch mode that holds the storage of every CUDA tensor an operator creates while it is active, so the
    caching allocator cannot give a freed tensor's memory to a later one: every buffer of a captured step is its own.

    It holds storages, not tensors: a held tensor would raise its reference count, and autograd's AccumulateGrad
    then copies a new gradient instead of taking it (``zero_grad(set_to_none=True)`` steps would capture an extra
    copy kernel per parameter). Outputs that share a storage with an input (in-place and ``out=`` operators: the
    parameters, the optimizer's state) are the step's own tensors, not new buffers, and are not counted. Only
    strided tensors have a storage to hold. ``kept`` lists the storages; ``nbytes`` adds their sizes."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    def _storage(t: Any) -> Any:
        if not (isinstance(t, torch.Tensor) and t.is_cuda and t.layout == torch.strided):
            return None
        try:
            return t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor subclass or wrapper without its own storage
            return None

    class KeepAlive(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.kept: list[Any] = []
            self._seen: set[int] = set()
            self.nbytes = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            inputs = {st.data_ptr() for st in map(_storage, tree_leaves((args, kwargs or {}))) if st is not None}
            for st in map(_storage, tree_leaves(out)):
                if st is None:
                    continue
                key = st.data_ptr()
                if key in inputs or key in self._seen:
                    continue
                self._seen.add(key)
                self.kept.append(st)
                self.nbytes += st.nbytes()
            return out

    return KeepAlive()


def _capture_or_oom(torch: Any, step: Callable[[], Any], device: int, keep_buffers: bool) -> tuple[Any, Any, bool]:
    """:func:`_capture_once`; with ``keep_buffers``, an out-of-memory error (or one raised while ending the capture
    after it) gives ``(None, None, True)`` with everything the try held released, so the caller can retry."""
    if not keep_buffers:
        g, keep = _capture_once(torch, step, device, False)
        return g, keep, False
    try:
        g, keep = _capture_once(torch, step, device, True)
        return g, keep, False
    except RuntimeError as exc:
        oom = isinstance(exc, torch.cuda.OutOfMemoryError) or isinstance(exc.__context__, torch.cuda.OutOfMemoryError)
        if not oom:
            raise
    return None, None, True


def _capture_once(torch: Any, step: Callable[[], Any], device: int, keep_buffers: bool) -> tuple[Any, Any]:
    """One capture of ``step`` (replayed once and synchronised); the keep-alive mode where asked, else None."""
    g = torch.cuda.CUDAGraph(keep_graph=True)
    keep = _keep_alive_mode(torch) if keep_buffers else None
    try:
        with torch.cuda.graph(g):
            if keep is None:
                step()
            else:
                with keep:
                    step()
    except BaseException:
        if keep is not None:
            keep.kept.clear()  # let the allocator have the memory back before anyone retries
        raise
    if hasattr(g, "instantiate"):
        g.instantiate()
    g.replay()
    torch.cuda.synchronize(device)
    return g, keep


def capture_torch(
    step: Callable[[], Any], device: int = 0, warmup: int = 3, state: Any = None, keep_buffers: bool = True
) -> TorchGraph:
    """Capture one call of ``step`` (PyTorch work on ``device``) as a CUDA graph.

    The step runs ``warmup`` times on a side stream first (allocations, cuDNN/cuBLAS choices),
    as PyTorch's capture requires. A step that synchronises with the host or changes shapes
    cannot be captured: that is a one-line :class:`GraphError`. After capture the tensors the step
    updates are snapshot (:class:`~archline.hw.graph_state.StepState`): those ``state`` reaches (modules,
    optimizers, tensors), or by default those the step's closure reaches.

    ``keep_buffers`` (the default): the storage of every tensor the step's operators create during capture is
    held as long as the graph (:func:`_keep_alive_mode`), so no buffer of the step reuses another's memory and
    a node switched off leaves its consumers data of the step, not another tensor's (docs/replay.md, session
    9). Where that runs out of GPU memory the step is captured again with its memory reused, with a note.
    """
    try:
        import torch
    except ImportError:
        raise GPUUnavailableError("graph replay of a PyTorch step needs PyTorch (pip install torch)") from None
    if not torch.cuda.is_available():
        raise GPUUnavailableError(
            f"graph replay needs PyTorch with CUDA and a GPU; this PyTorch ({torch.__version__}) sees none"
        )
    torch.cuda.set_device(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    fallback = ""
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
        g, keep, oom = _capture_or_oom(torch, step, device, keep_buffers)
        if oom:
            # every buffer its own did not fit: free what the first try held, capture as PyTorch does
            import gc

            gc.collect()
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
            g, keep, _ = _capture_or_oom(torch, step, device, False)
            fallback = (
                "the step was captured with its buffers reused: keeping every buffer its own ran out of GPU memory; "
                "a node switched off may leave its consumers another tensor's data (docs/replay.md)"
            )
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphError(f"the step cannot be captured as a CUDA graph: {first}") from None
    tensors = step_tensors(step if state is None else state, device)
    out = TorchGraph(g, device, StepState(tensors, device))
    if fallback:
        out.notes.append(fallback)
    if keep is not None:
        out.kept = keep.kept  # held as long as the graph: its buffers stay the step's own
        out.kept_buffers = True
        out.notes.append(
            f"captured with every buffer the step's operators create kept its own ({len(keep.kept)} buffers, "
            f"{keep.nbytes / 1e9:.3g} GB): no buffer of the step reuses another's memory, so a node switched off "
            "leaves its consumers what it wrote in an earlier replay (library workspaces are still shared)"
        )
    return out
