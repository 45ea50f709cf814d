"""Driver calls on the nodes of a captured CUDA graph: listing, cluster facts, opt-in, rebuilt executables.

Everything here goes through cuda-bindings' driver module and turns a failed call into a
one-line :class:`GraphError`. Written for cuda-bindings 12.x and 13.x: where a call's signature
differs between them (edge data in CUDA 12.3+), both forms are tried.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from archline.errors import ArchlineError

__all__ = [
    "CLUSTER_ERROR",
    "GraphError",
    "GraphNode",
    "SwitchError",
    "build_without",
    "check",
    "cluster_opt_in",
    "describe_node",
    "driver",
    "error_text",
    "instantiate",
    "list_nodes",
    "restore_clusters",
]

#: CUDA_ERROR_INVALID_CLUSTER_SIZE: "a kernel launch error has occurred due to cluster misconfiguration".
CLUSTER_ERROR = 912


class GraphError(ArchlineError):
    """A step that cannot be captured or replayed as a CUDA graph (one line, exit 2)."""

    exit_code = 2


class SwitchError(GraphError):
    """Some nodes could not be switched as asked: ``failed`` maps each node's index to why.

    The other nodes were switched; a node that failed keeps its previous state.
    """

    def __init__(self, failed: dict[int, str], message: str = "") -> None:
        first = next(iter(failed.items()), None)
        text = message or (
            f"{len(failed)} graph node(s) could not be switched (node {first[0]}: {first[1]})" if first else "?"
        )
        super().__init__(text)
        self.failed = dict(failed)


@dataclass(frozen=True)
class GraphNode:
    """One node of a captured graph that can be switched off: its position, kind and kernel name.

    ``cluster`` is the thread-block cluster it launches with (blocks in x, y, z): the node's
    cluster-dimension attribute, else the function's compiled ``__cluster_dims__``; (1, 1, 1)
    for no cluster (and for copies and memsets).
    """

    index: int
    kind: str  # kernel, memcpy, memset
    name: str
    cluster: tuple[int, int, int] = (1, 1, 1)

    @property
    def cluster_blocks(self) -> int:
        x, y, z = self.cluster
        return max(x, 1) * max(y, 1) * max(z, 1)


def driver() -> Any:
    from cuda.bindings import driver as d

    return d


def error_text(err: Any) -> str:
    """``CUDA error 912 (a kernel launch error has occurred due to cluster misconfiguration)``."""
    d = driver()
    try:
        _, msg = d.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
    except (TypeError, ValueError):
        text = "?"
    return f"CUDA error {int(err)} ({text})"


def check(res: Any, what: str) -> Any:
    """cuda-bindings returns (error, values...): raise on error, else the values."""
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != int(driver().CUresult.CUDA_SUCCESS):
        raise GraphError(f"{what}: {error_text(err)}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def _handles(fn: Any, handle: Any, what: str) -> list[Any]:
    """Nodes from a (handle, count) query such as cuGraphNodeGetDependencies (with or without edge data)."""
    first = check(fn(handle, 0), what)
    count = int(first[-1] if isinstance(first, tuple) else first)
    if count == 0:
        return []
    out = check(fn(handle, count), what)
    nodes = out[0] if isinstance(out, tuple) else out
    return list(nodes)[:count]


def _neighbours(fn: Any, handle: Any, what: str) -> list[Any]:
    """Nodes from a dependency query (cuGraphNodeGetDependencies/-DependentNodes), asked with room to spare
    and asked again with more until the answer fits: it does not rely on a count-only call with no array."""
    room = 16
    while True:
        out = check(fn(handle, room), what)
        count = int(out[-1])
        if count < room:
            return [n for n in list(out[0])[:count] if int(n)]
        room = 2 * max(room, count)


def _int3(v: Any) -> tuple[int, int, int]:
    return int(v.x), int(v.y), int(v.z)


def _node_cluster(h: Any) -> tuple[int, int, int] | None:
    d = driver()
    attr = d.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    try:
        return _int3(check(d.cuGraphKernelNodeGetAttribute(h, attr), "cuGraphKernelNodeGetAttribute").clusterDim)
    except GraphError:
        return None


def _func_attr(func: Any, name: str) -> int | None:
    d = driver()
    try:
        return int(check(d.cuFuncGetAttribute(getattr(d.CUfunction_attribute, name), func), "cuFuncGetAttribute"))
    except (GraphError, AttributeError):
        return None


def _compiled_cluster(func: Any) -> tuple[int, int, int]:
    dims = [_func_attr(func, f"CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_{a}") for a in ("WIDTH", "HEIGHT", "DEPTH")]
    x, y, z = (v or 0 for v in dims)
    return x, y, z


def _cluster_of(h: Any, func: Any) -> tuple[int, int, int]:
    node = _node_cluster(h) or (0, 0, 0)
    if node[0] * node[1] * node[2] > 1:
        return node
    compiled = _compiled_cluster(func)
    if compiled[0] * max(compiled[1], 1) * max(compiled[2], 1) > 1:
        return (max(compiled[0], 1), max(compiled[1], 1), max(compiled[2], 1))
    return (1, 1, 1)


def _launch_order(handles: list[Any]) -> list[Any]:
    """The nodes in a topological order (Kahn's, ties kept in the driver's listing order): every node after the
    nodes it depends on, so a prefix of the order never runs a node without its producers (the prefix design)."""
    d = driver()
    at = {int(h): i for i, h in enumerate(handles)}
    deps = [
        [at[int(p)] for p in _neighbours(d.cuGraphNodeGetDependencies, h, "cuGraphNodeGetDependencies") if int(p) in at]
        for h in handles
    ]
    users: list[list[int]] = [[] for _ in handles]
    left = [len(ds) for ds in deps]
    for i, ds in enumerate(deps):
        for j in ds:
            users[j].append(i)
    ready = [i for i, n in enumerate(left) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            left[u] -= 1
            if left[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(handles):  # a cycle cannot be captured; keep the listing rather than lose nodes
        return handles
    return [handles[i] for i in order]


def list_nodes(graph: Any) -> tuple[list[Any], list[GraphNode]]:
    """The graph's kernel, copy and memset nodes (the ones that can be switched off) and their handles, in a
    topological order of the graph (indices follow it)."""
    d = driver()
    handles = _launch_order(_handles(d.cuGraphGetNodes, graph, "cuGraphGetNodes"))
    kinds = {
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL: "kernel",
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY: "memcpy",
        d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET: "memset",
    }
    keep: list[Any] = []
    out: list[GraphNode] = []
    for h in handles:
        kind = kinds.get(check(d.cuGraphNodeGetType(h), "cuGraphNodeGetType"))
        if kind is None:
            continue  # event, host, empty or child-graph nodes cannot be switched off
        name, cluster = kind, (1, 1, 1)
        if kind == "kernel":
            params = check(d.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
            raw = check(d.cuFuncGetName(params.func), "cuFuncGetName")
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            cluster = _cluster_of(h, params.func)
        out.append(GraphNode(len(out), kind, name, cluster))
        keep.append(h)
    return keep, out


def describe_node(h: Any) -> dict[str, Any]:
    """What a kernel node launches with, for a report of nodes that cannot be switched (None: unreadable)."""
    d = driver()
    out: dict[str, Any] = {}
    try:
        p = check(d.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
    except GraphError as exc:
        return {"error": str(exc)}
    out["grid"] = [int(p.gridDimX), int(p.gridDimY), int(p.gridDimZ)]
    out["block"] = [int(p.blockDimX), int(p.blockDimY), int(p.blockDimZ)]
    out["shared_mem_bytes"] = int(p.sharedMemBytes)
    out["node_cluster"] = _node_cluster(h)
    ids = d.CUkernelNodeAttrID
    for key, attr, field in (
        ("preferred_cluster", "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION", "preferredClusterDim"),
        ("cluster_scheduling", "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE", None),
        ("cooperative", "CU_LAUNCH_ATTRIBUTE_COOPERATIVE", "cooperative"),
    ):
        try:
            v = check(d.cuGraphKernelNodeGetAttribute(h, getattr(ids, attr)), "cuGraphKernelNodeGetAttribute")
            val = getattr(v, field) if field else v.clusterSchedulingPolicyPreference
            out[key] = _int3(val) if key == "preferred_cluster" else int(val)
        except (GraphError, AttributeError, TypeError, ValueError):
            out[key] = None
    out["compiled_cluster"] = _compiled_cluster(p.func)
    out["non_portable_cluster_allowed"] = _func_attr(p.func, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED")
    out["cluster_size_must_be_set"] = _func_attr(p.func, "CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET")
    out["has_library_kernel"] = bool(int(getattr(p, "kern", 0) or 0))
    return out


def cluster_opt_in(
    handles: Iterable[Any], nodes: Sequence[GraphNode], device: int, written: list[tuple[Any, Any]]
) -> dict[str, int]:
    """Prepare cluster-launched kernel nodes for switching: allow non-portable cluster sizes on their
    functions (the CUkernel and its per-context function too), and write the compiled cluster into
    the node's cluster-dimension attribute where the node carries none (each node and its previous
    value appended to ``written``, for :func:`restore_clusters`). Counts of what was done."""
    d = driver()
    allow = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    attr = d.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dev = check(d.cuDeviceGet(device), "cuDeviceGet")
    done = {"cluster_nodes": 0, "functions_opted_in": 0, "opt_in_failed": 0, "cluster_dims_written": 0}
    seen: set[int] = set()
    for h, n in zip(handles, nodes, strict=True):
        if n.kind != "kernel" or n.cluster_blocks <= 1:
            continue
        done["cluster_nodes"] += 1
        p = check(d.cuGraphKernelNodeGetParams(h), "cuGraphKernelNodeGetParams")
        funcs = [p.func]
        kern = getattr(p, "kern", None)
        if kern is not None and int(kern) and int(kern) not in seen:
            seen.add(int(kern))
            ok = int(d.cuKernelSetAttribute(allow, 1, kern, dev)[0]) == 0
            done["functions_opted_in" if ok else "opt_in_failed"] += 1
            res = d.cuKernelGetFunction(kern)
            if int(res[0]) == 0:
                funcs.append(res[1])
        for f in funcs:
            if int(f) in seen:
                continue
            seen.add(int(f))
            ok = int(d.cuFuncSetAttribute(f, allow, 1)[0]) == 0
            done["functions_opted_in" if ok else "opt_in_failed"] += 1
        node = _node_cluster(h) or (0, 0, 0)
        if node[0] * node[1] * node[2] <= 1:
            old = d.cuGraphKernelNodeGetAttribute(h, attr)
            v = d.CUkernelNodeAttrValue()
            v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = n.cluster
            if int(old[0]) == 0 and int(d.cuGraphKernelNodeSetAttribute(h, attr, v)[0]) == 0:
                written.append((h, old[1]))
                done["cluster_dims_written"] += 1
    return done


def restore_clusters(written: list[tuple[Any, Any]]) -> None:
    """Put back the cluster-dimension attributes :func:`cluster_opt_in` wrote (and empty the list)."""
    d = driver()
    attr = d.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    while written:
        h, old = written.pop()
        d.cuGraphKernelNodeSetAttribute(h, attr, old)


def _add_edge(graph: Any, a: Any, b: Any) -> None:
    d = driver()
    try:
        res = d.cuGraphAddDependencies(graph, [a], [b], None, 1)  # cuda-bindings 13: edge data
    except TypeError:
        res = d.cuGraphAddDependencies(graph, [a], [b], 1)
    check(res, "cuGraphAddDependencies")


def _instantiate(graph: Any) -> tuple[Any, Any, Any]:
    """(error, executable, the node the driver blames or None)."""
    d = driver()
    p = d.CUDA_GRAPH_INSTANTIATE_PARAMS()
    p.flags = 0
    res = d.cuGraphInstantiateWithParams(graph, p)
    err, exe = res[0], res[1] if len(res) > 1 else None
    bad = getattr(p, "hErrNode_out", None)
    return err, exe, bad if bad is not None and int(bad) else None


def instantiate(graph: Any, handles: Sequence[Any]) -> Any:
    """An executable of ``graph`` itself, whose nodes can be toggled by ``handles`` (``cuGraphNodeSetEnabled``
    takes nodes of the graph the executable was instantiated from, not of a clone)."""
    err, exe, bad = _instantiate(graph)
    if int(err) == 0:
        return exe
    blamed = [i for i, h in enumerate(handles) if bad is not None and int(h) == int(bad)]
    if blamed:
        raise SwitchError({blamed[0]: f"instantiate: {error_text(err)}"})
    raise GraphError(f"cuGraphInstantiate of the step: {error_text(err)}")


def build_without(graph: Any, handles: Sequence[Any], off: Iterable[int]) -> Any:
    """An executable of ``graph`` in which the nodes ``off`` (indices into ``handles``) are empty nodes
    that keep their edges: built on a clone (``cuGraphClone``), instantiated, the clone destroyed.

    Dependencies are re-linked without their edge data (a programmatic edge becomes a full one,
    which only orders more strictly). A failed instantiation naming one of ``handles`` raises
    :class:`SwitchError` for that node; one naming no node, :class:`GraphError`.
    """
    d = driver()
    clone = check(d.cuGraphClone(graph), "cuGraphClone")
    try:
        for i in off:
            c = check(d.cuGraphNodeFindInClone(handles[i], clone), "cuGraphNodeFindInClone")
            deps = _neighbours(d.cuGraphNodeGetDependencies, c, "cuGraphNodeGetDependencies")
            outs = _neighbours(d.cuGraphNodeGetDependentNodes, c, "cuGraphNodeGetDependentNodes")
            empty = check(d.cuGraphAddEmptyNode(clone, deps, len(deps)), "cuGraphAddEmptyNode")
            for o in outs:
                _add_edge(clone, empty, o)
            check(d.cuGraphDestroyNode(c), "cuGraphDestroyNode")
        err, exe, bad = _instantiate(clone)
        if int(err) == 0:
            return exe
        what = f"instantiate: {error_text(err)}"
        if bad is not None:
            for i, h in enumerate(handles):
                res = d.cuGraphNodeFindInClone(h, clone)
                if int(res[0]) == 0 and int(res[1]) == int(bad):
                    raise SwitchError({i: what})
        raise GraphError(f"cuGraphInstantiate of a rebuilt step: {error_text(err)}")
    finally:
        d.cuGraphDestroy(clone)
