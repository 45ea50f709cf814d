"""archline.hw.graph against a fake of cuda-bindings' driver: listing nodes, the three ways of switching them
(CUDA error 912 on cluster-launched kernels, the opt-in, executables rebuilt with empty nodes), describe, close."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from archline.hw.graph import GraphError, SwitchError, TorchGraph
from archline.measurement.attribute.replay_switch import choose_switching
from tests.helpers.fake_cuda_driver import FakeDriver, FakeTorchGraph, fake_torch

STEP = [
    ("kernel", "conv_a", (1, 2, 1)),
    ("memset", "", (0, 0, 0)),
    ("kernel", "relu", (0, 0, 0)),
    ("kernel", "conv_b", (2, 1, 1)),
    ("empty", "", (0, 0, 0)),
    ("memcpy", "", (0, 0, 0)),
    ("kernel", "norm", (1, 1, 1)),
]


def _graph(monkeypatch: pytest.MonkeyPatch, refuse: str | None = None) -> tuple[FakeDriver, TorchGraph]:
    drv = FakeDriver(refuse)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    return drv, TorchGraph(FakeTorchGraph(drv, drv.make_graph(STEP)), 0)


def _kernels(tg: TorchGraph) -> dict[str, int]:
    return {n.name: n.index for n in tg.nodes if n.kind == "kernel"}


def test_nodes_kinds_names_and_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    _, tg = _graph(monkeypatch)
    assert [(n.kind, n.name) for n in tg.nodes] == [
        ("kernel", "conv_a"), ("memset", "memset"), ("kernel", "relu"), ("kernel", "conv_b"),
        ("memcpy", "memcpy"), ("kernel", "norm"),
    ]  # fmt: skip
    assert [n.cluster for n in tg.nodes if n.kind == "kernel"] == [(1, 2, 1), (1, 1, 1), (2, 1, 1), (1, 1, 1)]
    d = tg.describe(0)
    assert d["name"] == "conv_a" and d["grid"] == [4, 2, 1] and d["node_cluster"] == (1, 2, 1)
    assert tg.describe(1) == {"index": 1, "kind": "memset", "name": "memset", "cluster": [1, 1, 1]}


def test_toggle_switches_pytorchs_own_executable(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch)
    k = _kernels(tg)
    tg.set_switch_mode("toggle")
    assert tg.check_switchable(list(range(len(tg.nodes)))) == {}
    tg.set_enabled([k["relu"], k["norm"], 1])
    tg.replay()
    assert drv.launched[-1] == ["relu", "norm"]
    tg.set_enabled(None)
    tg.replay()
    assert drv.launched[-1] == ["conv_a", "relu", "conv_b", "norm"]
    assert len(drv.execs) == 1  # nothing of our own


def test_912_on_cluster_nodes_and_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch, refuse="optin")
    k = _kernels(tg)
    tg.set_switch_mode("toggle")
    failed = tg.check_switchable(list(range(len(tg.nodes))))
    assert set(failed) == {k["conv_a"], k["conv_b"]}
    assert failed[k["conv_a"]] == (
        "disable: CUDA error 912 (a kernel launch error has occurred due to cluster misconfiguration)"
    )
    with pytest.raises(SwitchError) as exc:
        tg.set_enabled([k["relu"]])
    assert set(exc.value.failed) == {k["conv_a"], k["conv_b"]}
    tg.set_switch_mode("toggle+optin")  # functions allowed non-portable clusters, then an executable of our own
    assert "2 cluster-launched kernel nodes" in tg.notes[-1]
    assert tg.check_switchable(list(range(len(tg.nodes)))) == {}
    tg.set_enabled([k["conv_b"], 1])
    tg.replay()
    assert drv.launched[-1] == ["conv_b"] and len(drv.execs) == 2
    tg.close()
    assert len(drv.execs) == 1  # ours destroyed, PyTorch's kept


def test_rebuild_replaces_switched_off_nodes_by_empty_nodes_keeping_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch, refuse="toggle")
    k = _kernels(tg)
    tg.set_switch_mode("toggle+optin")
    assert set(tg.check_switchable(list(range(len(tg.nodes))))) == {k["conv_a"], k["conv_b"]}
    tg.set_switch_mode("rebuild")
    graphs = len(drv.graphs)
    assert tg.check_switchable(list(range(len(tg.nodes)))) == {}
    tg.set_enabled([k["conv_a"], k["norm"], 1])
    tg.replay()
    assert drv.launched[-1] == ["conv_a", "norm"]
    assert len(drv.graphs) == graphs  # every clone destroyed after instantiation
    built = drv.execs[max(drv.execs)]
    kinds = [n.kind for n, _ in built.values()]
    assert kinds.count("kernel") == 2 and kinds.count("empty") == 1 + 3  # the step's own + relu, conv_b, copy
    # conv_a → … → norm still ordered through the empty nodes that replaced relu, conv_b and the copy.
    by_id = {h: n for h, (n, _) in built.items()}
    norm = next(h for h, n in by_id.items() if n.name == "norm")
    seen, todo = set(), [norm]
    while todo:
        h = todo.pop()
        seen.add(h)
        todo += [d for d in by_id[h].deps if d not in seen]
    assert any(by_id[h].name == "conv_a" for h in seen)
    execs = len(drv.execs)
    tg.set_enabled([k["conv_a"], k["norm"], 1])  # the same set again: the kept executable
    assert len(drv.execs) == execs


@pytest.mark.parametrize(("refuse", "mode"), [(None, "toggle"), ("optin", "toggle+optin"), ("toggle", "rebuild")])
def test_choose_switching_on_the_driver(monkeypatch: pytest.MonkeyPatch, refuse: Any, mode: str) -> None:
    _, tg = _graph(monkeypatch, refuse=refuse)
    s = choose_switching(tg, list(range(len(tg.nodes))))
    assert s.mode == mode and not s.not_switchable and tg.mode == mode


def test_a_node_pytorch_cannot_enable_again_rules_its_executable_out(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch)
    k = _kernels(tg)
    real = drv.cuGraphNodeSetEnabled

    def refuse_enable(e: int, h: int, on: int) -> tuple[int]:
        return (912,) if on and h == tg._handles[k["relu"]] else real(e, h, on)

    drv.cuGraphNodeSetEnabled = refuse_enable  # type: ignore[method-assign]
    with pytest.raises(GraphError, match="could not be enabled again"):
        tg.check_switchable([k["relu"]])
    with pytest.raises(GraphError, match="could not be enabled again"):
        tg.set_switch_mode("toggle")
    tg.set_switch_mode("toggle+optin")  # a fresh executable of our own: relu runs again
    tg.replay()
    assert "relu" in drv.launched[-1]


def test_a_node_with_many_dependents_keeps_every_edge_when_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    from archline.hw.graph_nodes import build_without

    drv, _ = _graph(monkeypatch)
    g = drv.make_graph([("kernel", "root", (0, 0, 0)), ("kernel", "hub", (0, 0, 0))])
    root, hub = list(drv.graphs[g])
    leaves = [drv.cuGraphAddEmptyNode(g, [hub], 1)[1] for _ in range(40)]  # 40 nodes wait for the hub
    exe = build_without(g, [root, hub], [1])
    nodes = {h: n for h, (n, _) in drv.execs[int(exe)].items()}
    stand_in = [h for h, n in nodes.items() if n.kind == "empty" and n.deps and nodes[n.deps[0]].name == "root"]
    assert len(stand_in) == 1 and "hub" not in [n.name for n in nodes.values()]
    assert sum(1 for n in nodes.values() if n.deps == [stand_in[0]]) == len(leaves)


def test_a_compiled_cluster_is_written_for_the_opt_in_and_put_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver("optin")
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    g = drv.make_graph([("kernel", "fixed_cluster", (0, 0, 0)), ("kernel", "plain", (0, 0, 0))])
    h = next(iter(drv.graphs[g]))
    params = drv.graphs[g][h].params
    assert params is not None
    drv.compiled[int(params.func)] = (2, 1, 1)  # __cluster_dims__(2, 1, 1), no launch attribute
    tg = TorchGraph(FakeTorchGraph(drv, g), 0)
    assert [n.cluster for n in tg.nodes] == [(2, 1, 1), (1, 1, 1)]
    tg.set_switch_mode("toggle+optin")
    assert "1 node cluster dimensions written" in tg.notes[-1]
    assert (drv.graphs[g][h].cluster.x, drv.graphs[g][h].cluster.y) == (2, 1)
    assert tg.check_switchable([0, 1]) == {}
    tg.set_switch_mode("rebuild")  # the captured graph as PyTorch left it
    assert (drv.graphs[g][h].cluster.x, drv.graphs[g][h].cluster.y, drv.graphs[g][h].cluster.z) == (0, 0, 0)


def test_rebuilt_executables_are_kept_least_recently_used_first(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch, refuse="toggle")
    tg.set_switch_mode("rebuild")
    sets = [[0, 1], [2, 1], [3, 1], [5, 1]]
    for s in sets[:3]:
        tg.set_enabled(s)
    tg.set_enabled(sets[0])  # used again: now the most recent
    builds = len(drv.execs)
    tg.set_enabled(sets[3])  # a fourth set: the least recently used ([2, 1]) goes
    assert len(drv.execs) == builds  # one built, one destroyed
    tg.set_enabled(sets[0])
    assert len(drv.execs) == builds  # still kept, no build
    tg.replay()
    assert drv.launched[-1] == ["conv_a"]
    tg.close()
    assert len(drv.execs) == 1


def test_back_to_pytorchs_executable_after_our_own(monkeypatch: pytest.MonkeyPatch) -> None:
    drv, tg = _graph(monkeypatch)
    k = _kernels(tg)
    tg.set_enabled([k["relu"], 1])  # PyTorch's executable: only relu on
    tg.set_switch_mode("toggle+optin")
    tg.set_enabled([k["norm"], 1])
    tg.set_switch_mode("toggle")  # every node of PyTorch's executable on again
    tg.replay()
    assert drv.launched[-1] == ["conv_a", "relu", "conv_b", "norm"]


def test_nodes_are_indexed_in_launch_order_whatever_order_the_driver_lists_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drv = FakeDriver()
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    g = drv.make_graph(STEP)
    drv.graphs[g] = dict(reversed(list(drv.graphs[g].items())))  # listed last node first
    tg = TorchGraph(FakeTorchGraph(drv, g), 0)
    want = [name or kind for kind, name, _ in STEP if kind in ("kernel", "memset", "memcpy")]
    assert [n.name if n.kind == "kernel" else n.kind for n in tg.nodes] == want
    assert [n.index for n in tg.nodes] == list(range(len(want)))
