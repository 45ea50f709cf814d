"""On a real GPU: CUPTI times a captured step's replay kernel by kernel, under the names graph capture gives its nodes
(the busy-time design model matches the two by name), and a node switched off is absent from the timing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_kernel_busy_s_of_a_replay_names_the_graphs_kernels() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupti")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.hw.cupti.busy import kernel_busy_s
    from archline.hw.graph import capture_torch

    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(256, 512, device="cuda")

    def step() -> None:
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    g = capture_torch(step, 0)
    try:
        kernels = {n.name for n in g.nodes if n.kind == "kernel"}
        busy = kernel_busy_s(g.replay, synchronize=g.synchronize)
        assert busy and set(busy) <= kernels  # every timed kernel is one of the graph's, by the same name
        assert all(0.0 < v < 0.1 for v in busy.values())
        again = kernel_busy_s(g.replay, synchronize=g.synchronize)
        assert set(again) == set(busy)
        # a kernel without clusters: switching cluster-launched nodes off can be refused (docs/replay.md)
        first = next(n for n in g.nodes if n.kind == "kernel" and tuple(n.cluster) == (1, 1, 1))
        same = [n.index for n in g.nodes if n.name == first.name]
        g.set_enabled([n.index for n in g.nodes if n.index not in same])
        off = kernel_busy_s(g.replay, synchronize=g.synchronize)
        assert first.name not in off
        g.set_enabled(None)
    finally:
        g.close()


def test_a_replay_ranks_its_groups_by_cuptis_busy_time() -> None:
    """archline.replay without a design: the top groups are the longest by CUPTI's busy time in the whole step (the
    host timings came out at nothing on the H100s of sessions 10-18), and the note says so."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupti")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.measurement.attribute.replay import REST, run_replay

    big = torch.nn.Linear(4096, 4096).cuda()
    small = torch.nn.Linear(64, 64).cuda()
    x, y = torch.randn(4096, 4096, device="cuda"), torch.randn(64, 64, device="cuda")

    def step() -> None:
        small(y).relu_()  # captured first: capture order would choose it
        big(x).relu_()

    res = run_replay(step, gpu=0, top=1, marginal=False, max_total_s=0.5, design_replicates=None)
    note = next(n for n in res.notes if "measured one by one, the largest by" in n)
    assert "the largest by busy time in the whole step (CUPTI)" in note, res.notes
    rows = {r.group: r for r in res.rows}
    chosen = [r for g, r in rows.items() if r.measurable and r.energy_j == r.energy_j and not g.startswith("[")]
    # the 4096² GEMM, not the first kernel captured: alone it draws more than every other node together
    assert len(chosen) == 1 and chosen[0].energy_j > rows[REST].energy_j, res.rows
    # session 20: the row keeps the busy time that ranked it, the GEMM's CUPTI duration per step: 2·4096³ flop run
    # at 10-1000 TFLOP/s on any data-centre GPU: 0.14-14 ms
    busy = chosen[0].busy_time_s
    assert busy is not None and 1.0e-4 < busy < 2.0e-2, chosen[0]
