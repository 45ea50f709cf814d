"""On a real GPU: graph capture finds the tensors a PyTorch training step updates, and restores them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_capture_snapshots_weights_gradients_and_optimizer_state() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.hw.graph import capture_torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 64, device="cuda")

    def step() -> None:
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    g = capture_torch(step, 0)
    try:
        st = g.state
        assert st is not None and st.guarded
        # 4 weights + 4 gradients + 4 momentum buffers + the input
        assert st.count == 13
        w0 = model[0].weight.detach().clone()
        m0 = opt.state[model[0].weight]["momentum_buffer"].clone()
        g0 = model[0].weight.grad.detach().clone()
        for _ in range(5):
            g.replay()
        g.synchronize()
        assert not torch.equal(model[0].weight, w0)  # the replays trained the model
        assert g.restore_state() is True
        g.synchronize()
        assert torch.equal(model[0].weight, w0)
        assert torch.equal(opt.state[model[0].weight]["momentum_buffer"], m0)
        assert torch.equal(model[0].weight.grad, g0)
        g.replay()
        g.reset_state()  # enqueued after the replay on the same stream
        g.synchronize()
        assert torch.equal(model[0].weight, w0)
        with torch.no_grad():
            model[0].weight.fill_(float("nan"))
        assert g.restore_state() is False  # it was non-finite before the restore
        assert st.finite() and st.nonfinite == 1
    finally:
        g.close()


def test_a_script_step_that_uses_module_globals_is_guarded() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.hw.graph import capture_torch

    ns: dict[str, object] = {"torch": torch}
    exec(  # a step as a script defines it: no closure, model and optimizer are the module's globals
        "model = torch.nn.Linear(32, 32).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x = torch.randn(8, 32, device='cuda')\n"
        "def step():\n"
        "    opt.zero_grad(set_to_none=True)\n"
        "    model(x).pow(2).mean().backward()\n"
        "    opt.step()\n",
        ns,
    )
    g = capture_torch(ns["step"], 0)  # type: ignore[arg-type]
    try:
        assert g.state is not None and g.state.guarded
        assert g.state.count >= 5  # weight, bias, their gradients, the input
    finally:
        g.close()


def test_capture_keeps_every_buffer_of_the_step_its_own() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.hw.graph import capture_torch

    x = torch.randn(1024, 1024, device="cuda")
    out = torch.empty(1024, 1024, device="cuda")

    def step() -> None:
        a = x * 2.0  # freed at once: without keep_buffers the pool hands its memory to b
        del a
        b = x + 1.0
        out.copy_(b)

    graphs = {keep: capture_torch(step, 0, keep_buffers=keep) for keep in (True, False)}
    try:
        kept = graphs[True].kept
        assert graphs[True].kept_buffers and any("kept its own" in n for n in graphs[True].notes)
        ptrs = [st.data_ptr() for st in kept]
        assert len(kept) == 2 and len(set(ptrs)) == 2  # a and b: two buffers, not one reused; out is an input
        assert out.untyped_storage().data_ptr() not in ptrs
        assert graphs[False].kept == [] and not graphs[False].kept_buffers
    finally:
        for g in graphs.values():
            g.close()


def test_kept_buffers_leave_the_captured_step_as_it_is() -> None:
    # Holding tensors (not storages) would make AccumulateGrad copy gradients it otherwise takes when the step
    # sets them to None: one more kernel per parameter. The node count must not change with keep_buffers.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from archline.hw.graph import capture_torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()
        opt.step()

    counts = {}
    for keep in (False, True):
        g = capture_torch(step, 0, keep_buffers=keep)
        try:
            counts[keep] = len(g.nodes)
        finally:
            g.close()
    assert counts[True] == counts[False]
