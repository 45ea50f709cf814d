"""A fake of cuda-bindings' driver module for the graph calls archline makes, with a fake PyTorch graph.

Names are the driver's (camelCase fields and functions); return shapes follow cuda-bindings 13 ((error,
values...), edge data in dependency queries).
Graphs are nodes with dependencies; an executable is a snapshot of its graph's nodes with enable
flags, keyed by the original graph's node handles, as the driver does. ``refuse`` plays the
H100's CUDA error 912 on cluster-launched kernel nodes:

- ``"optin"``: switching such a node is refused until its function allows non-portable cluster sizes;
- ``"toggle"``: switching it in any executable is refused (only instantiating without it works);
- ``None``: nothing is refused.
"""

from __future__ import annotations

import itertools
import types
from dataclasses import dataclass, field
from typing import Any

OK = 0
E912 = 912
_ids = itertools.count(1000)


class Handle(int):
    """CUgraph, CUgraphNode, CUgraphExec, CUfunction...: an int, as cuda-bindings' handles convert to."""

    def __new__(cls, v: int = 0) -> Handle:
        return super().__new__(cls, int(v))


@dataclass
class Dim3:
    x: int = 0
    y: int = 0
    z: int = 0


@dataclass
class AttrValue:
    clusterDim: Dim3 = field(default_factory=Dim3)
    preferredClusterDim: Dim3 = field(default_factory=Dim3)
    cooperative: int = 0
    clusterSchedulingPolicyPreference: int = 0


@dataclass
class KernelParams:
    func: Handle
    kern: Handle
    gridDimX: int = 4
    gridDimY: int = 2
    gridDimZ: int = 1
    blockDimX: int = 128
    blockDimY: int = 1
    blockDimZ: int = 1
    sharedMemBytes: int = 0


@dataclass
class Node:
    kind: str  # kernel, memcpy, memset, empty
    name: str = ""
    params: KernelParams | None = None
    cluster: Dim3 = field(default_factory=Dim3)
    deps: list[int] = field(default_factory=list)


@dataclass
class InstantiateParams:
    flags: int = 0
    hErrNode_out: Handle = field(default_factory=Handle)


class FakeDriver(types.SimpleNamespace):
    """The driver: graphs, executables, functions, and the log of kernels each launch ran."""

    def __init__(self, refuse: str | None = None) -> None:
        super().__init__()
        self.refuse = refuse
        self.graphs: dict[int, dict[int, Node]] = {}
        self.clone_of: dict[int, dict[int, int]] = {}  # clone graph → original node → clone node
        self.execs: dict[int, dict[int, tuple[Node, bool]]] = {}
        self.exec_graph: dict[int, int] = {}
        self.non_portable: set[int] = set()
        self.compiled: dict[int, tuple[int, int, int]] = {}  # function → its __cluster_dims__
        self.launched: list[list[str]] = []
        self.set_enabled_calls = 0
        t = types.SimpleNamespace
        self.CUresult = t(CUDA_SUCCESS=OK)
        self.CUgraphNodeType = t(
            CU_GRAPH_NODE_TYPE_KERNEL="kernel",
            CU_GRAPH_NODE_TYPE_MEMCPY="memcpy",
            CU_GRAPH_NODE_TYPE_MEMSET="memset",
            CU_GRAPH_NODE_TYPE_EMPTY="empty",
        )
        self.CUkernelNodeAttrID = t(
            CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION="cluster",
            CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION="preferred",
            CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE="policy",
            CU_LAUNCH_ATTRIBUTE_COOPERATIVE="cooperative",
        )
        self.CUfunction_attribute = t(
            CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED="non_portable",
            CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET="must_be_set",
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH="w",
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT="h",
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH="d",
        )
        self.CUgraph = self.CUgraphExec = self.CUgraphNode = Handle
        self.CUkernelNodeAttrValue = AttrValue
        self.CUDA_GRAPH_INSTANTIATE_PARAMS = InstantiateParams

    # -- building a captured step ------------------------------------------------------------
    def make_graph(self, spec: list[tuple[str, str, tuple[int, int, int]]]) -> int:
        """A chain of nodes (kind, name, cluster): each depends on the one before."""
        g = next(_ids)
        nodes: dict[int, Node] = {}
        prev: int | None = None
        for kind, name, cl in spec:
            h = next(_ids)
            params = KernelParams(Handle(next(_ids)), Handle(next(_ids))) if kind == "kernel" else None
            nodes[h] = Node(kind, name, params, Dim3(*cl), [] if prev is None else [prev])
            prev = h
        self.graphs[g] = nodes
        return g

    def _node(self, h: int) -> Node:
        for nodes in self.graphs.values():
            if int(h) in nodes:
                return nodes[int(h)]
        raise KeyError(h)

    def _graph_of(self, h: int) -> dict[int, Node]:
        return next(nodes for nodes in self.graphs.values() if int(h) in nodes)

    # -- queries -----------------------------------------------------------------------------
    def cuGetErrorString(self, err: int) -> tuple[int, bytes]:
        return OK, b"a kernel launch error has occurred due to cluster misconfiguration" if err == E912 else b"?"

    def cuGraphGetNodes(self, g: int, n: int = 0) -> tuple[int, list[Handle], int]:
        hs = [Handle(h) for h in self.graphs[int(g)]]
        return OK, hs[:n] if n else [], len(hs)

    def cuGraphNodeGetType(self, h: int) -> tuple[int, str]:
        return OK, self._node(h).kind

    def cuGraphKernelNodeGetParams(self, h: int) -> tuple[int, Any]:
        p = self._node(h).params
        return (OK, p) if p is not None else (1, None)

    def cuFuncGetName(self, f: int) -> tuple[int, bytes]:
        for nodes in self.graphs.values():
            for n in nodes.values():
                if n.params is not None and int(n.params.func) == int(f):
                    return OK, n.name.encode()
        return 1, b""

    def cuGraphKernelNodeGetAttribute(self, h: int, attr: str) -> tuple[int, AttrValue]:
        return OK, AttrValue(clusterDim=Dim3(**self._node(h).cluster.__dict__))

    def cuGraphKernelNodeSetAttribute(self, h: int, attr: str, v: AttrValue) -> tuple[int]:
        self._node(h).cluster = Dim3(v.clusterDim.x, v.clusterDim.y, v.clusterDim.z)
        return (OK,)

    def cuFuncGetAttribute(self, attr: str, f: int) -> tuple[int, int]:
        if attr in ("w", "h", "d"):
            return OK, self.compiled.get(int(f), (0, 0, 0))["whd".index(attr)]
        return OK, int(attr == "non_portable" and int(f) in self.non_portable)

    def cuFuncSetAttribute(self, f: int, attr: str, v: int) -> tuple[int]:
        self.non_portable.add(int(f))
        return (OK,)

    def cuKernelSetAttribute(self, attr: str, v: int, kern: int, dev: int) -> tuple[int]:
        self.non_portable.add(int(kern))
        return (OK,)

    def cuKernelGetFunction(self, kern: int) -> tuple[int, Handle]:
        for nodes in self.graphs.values():
            for n in nodes.values():
                if n.params is not None and int(n.params.kern) == int(kern):
                    return OK, n.params.func
        return 1, Handle()

    def cuDeviceGet(self, i: int) -> tuple[int, int]:
        return OK, i

    # -- editing -------------------------------------------------------------------------------
    def cuGraphClone(self, g: int) -> tuple[int, Handle]:
        c = next(_ids)
        mapping = {h: next(_ids) for h in self.graphs[int(g)]}
        self.graphs[c] = {
            mapping[h]: Node(n.kind, n.name, n.params, Dim3(**n.cluster.__dict__), [mapping[d] for d in n.deps])
            for h, n in self.graphs[int(g)].items()
        }
        self.clone_of[c] = mapping
        return OK, Handle(c)

    def cuGraphNodeFindInClone(self, h: int, c: int) -> tuple[int, Handle]:
        got = self.clone_of[int(c)].get(int(h))
        return (OK, Handle(got)) if got is not None and got in self.graphs[int(c)] else (1, Handle())

    def cuGraphNodeGetDependencies(self, h: int, n: int = 0) -> tuple[int, list[Handle], list[None], int]:
        deps = [Handle(d) for d in self._node(h).deps]
        return OK, deps[:n] if n else [], [None] * (len(deps) if n else 0), len(deps)

    def cuGraphNodeGetDependentNodes(self, h: int, n: int = 0) -> tuple[int, list[Handle], list[None], int]:
        outs = [Handle(k) for k, v in self._graph_of(h).items() if int(h) in v.deps]
        return OK, outs[:n] if n else [], [None] * (len(outs) if n else 0), len(outs)

    def cuGraphAddEmptyNode(self, g: int, deps: list[int], n: int) -> tuple[int, Handle]:
        h = next(_ids)
        self.graphs[int(g)][h] = Node("empty", deps=[int(d) for d in deps[:n]])
        return OK, Handle(h)

    def cuGraphAddDependencies(self, g: int, a: list[int], b: list[int], data: Any, n: int) -> tuple[int]:
        for x, y in zip(a[:n], b[:n], strict=True):
            self.graphs[int(g)][int(y)].deps.append(int(x))
        return (OK,)

    def cuGraphDestroyNode(self, h: int) -> tuple[int]:
        nodes = self._graph_of(h)
        del nodes[int(h)]
        for n in nodes.values():
            n.deps = [d for d in n.deps if d != int(h)]
        return (OK,)

    def cuGraphDestroy(self, g: int) -> tuple[int]:
        self.graphs.pop(int(g), None)
        return (OK,)

    # -- executables -----------------------------------------------------------------------
    def instantiate(self, g: int) -> int:
        e = next(_ids)
        self.execs[e] = {
            h: (Node(n.kind, n.name, n.params, n.cluster, list(n.deps)), True) for h, n in self.graphs[g].items()
        }
        self.exec_graph[e] = g
        return e

    def cuGraphInstantiateWithParams(self, g: int, p: InstantiateParams) -> tuple[int, Handle]:
        return OK, Handle(self.instantiate(int(g)))

    def cuGraphExecDestroy(self, e: int) -> tuple[int]:
        self.execs.pop(int(e), None)
        return (OK,)

    def _refused(self, node: Node) -> bool:
        big = node.kind == "kernel" and node.cluster.x * max(node.cluster.y, 1) * max(node.cluster.z, 1) > 1
        if not big or self.refuse is None:
            return False
        assert node.params is not None
        return self.refuse == "toggle" or int(node.params.func) not in self.non_portable

    def cuGraphNodeSetEnabled(self, e: int, h: int, on: int) -> tuple[int]:
        self.set_enabled_calls += 1
        node, _ = self.execs[int(e)][int(h)]
        if self._refused(node):
            return (E912,)
        self.execs[int(e)][int(h)] = (node, bool(on))
        return (OK,)

    def cuGraphExecKernelNodeSetParams(self, e: int, h: int, p: Any) -> tuple[int]:
        return (OK,)

    def cuGraphLaunch(self, e: int, stream: int) -> tuple[int]:
        nodes = self.execs[int(e)]
        order: list[int] = []
        done: set[int] = set()
        while len(order) < len(nodes):  # a topological order: every node after its dependencies
            ready = [h for h, (n, _) in nodes.items() if h not in done and all(d in done for d in n.deps)]
            order.append(ready[0])
            done.add(ready[0])
        self.launched.append([nodes[h][0].name for h in order if nodes[h][1] and nodes[h][0].kind == "kernel"])
        return (OK,)


class FakeTorchGraph:
    """What archline uses of ``torch.cuda.CUDAGraph(keep_graph=True)`` after capture and instantiate."""

    def __init__(self, drv: FakeDriver, graph: int) -> None:
        self.drv, self.graph, self.exec = drv, graph, drv.instantiate(graph)

    def raw_cuda_graph(self) -> int:
        return self.graph

    def raw_cuda_graph_exec(self) -> int:
        return self.exec

    def replay(self) -> None:
        self.drv.cuGraphLaunch(self.exec, 0)


def fake_torch() -> types.SimpleNamespace:
    """The ``torch`` module as TorchGraph uses it: the current stream and synchronize."""
    stream = types.SimpleNamespace(cuda_stream=0)
    cuda = types.SimpleNamespace(current_stream=lambda device=None: stream, synchronize=lambda device=None: None)
    return types.SimpleNamespace(cuda=cuda)
