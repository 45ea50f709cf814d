"""The runner on GPUs of other architectures: PTX built for the device's target, kernels it cannot run skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from archline.characterize.runner import Runner, RunnerOptions
from archline.core.executor import DeviceInfo
from archline.core.kernel import Arg, KernelSpec, Launch, Work
from tests.helpers.fake_gpu import FakeClock, FakeExecutor, FakeKernel, FakeSampler

PTX = ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry fake()\n{\n    ret;\n}\n"


@dataclass
class _Recording(FakeExecutor):
    """A fake GPU that keeps the PTX of every kernel it was asked to build."""

    built: list[str] = field(default_factory=list)

    def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> FakeKernel:
        self.built.append(ptx)
        return super().load(ptx, entry, opt_level=opt_level)


def _gpu(cc: tuple[int, int]) -> _Recording:
    dev = DeviceInfo(index=0, name=f"Fake cc {cc[0]}.{cc[1]}", compute_capability=cc, sm_count=4)
    return _Recording(FakeClock(), s_per_iter=1e-5, iters_index=0, device=dev)


def _spec(**needs: Any) -> KernelSpec:
    return KernelSpec(
        name="arith.fake.bf16",
        group="arithmetic",
        description="fake kernel",
        ptx=PTX,
        entry="fake",
        args=(Arg("iters", "u32", "iters"),),
        work=Work(unit="bf16", ops=64.0),
        launch=Launch(block=64, blocks_per_sm=1),
        **needs,
    )


def _run(ex: _Recording, spec: KernelSpec) -> dict[str, Any]:
    runner = Runner(ex, FakeSampler(ex), RunnerOptions(target_s=0.05, verify=False), clock=ex.clock)  # type: ignore[arg-type]
    return runner.run(spec).row


@pytest.mark.parametrize(
    ("cc", "header"),
    [
        ((7, 5), ".version 6.3\n.target sm_75"),
        ((8, 6), ".version 7.1\n.target sm_86"),
        ((12, 1), ".version 8.7\n.target sm_120"),
    ],
)
def test_ptx_is_built_for_the_devices_target(cc: tuple[int, int], header: str) -> None:
    ex = _gpu(cc)
    row = _run(ex, _spec())
    assert row["status"] == "ok"
    assert ex.built and all(p.startswith(header + "\n") for p in ex.built)


def test_a_kernel_newer_than_the_gpu_is_skipped_with_the_reason_and_never_built() -> None:
    ex = _gpu((7, 5))
    row = _run(ex, _spec(min_cc=(8, 0), min_ptx=(7, 0)))
    assert row["status"] == "skipped"
    assert row["note"] == "needs compute capability 8.0 (sm_80, Ampere) or later; sm_75 is 7.5"
    assert ex.built == []


def test_the_kernels_own_isa_raises_the_targets() -> None:
    ex = _gpu((8, 0))
    assert _run(ex, _spec(min_cc=(8, 0), min_ptx=(7, 8)))["status"] == "ok"
    assert ex.built[0].startswith(".version 7.8\n.target sm_80\n")


def test_architecture_specific_kernels_run_on_their_capability_only() -> None:
    hopper, blackwell = _gpu((9, 0)), _gpu((10, 0))
    spec = _spec(arch_specific="sm_90a", min_cc=(9, 0), min_ptx=(8, 0))
    assert _run(hopper, spec)["status"] == "ok"
    assert hopper.built[0].startswith(".version 8.0\n.target sm_90a\n")
    row = _run(blackwell, spec)
    assert row["status"] == "skipped" and "sm_90a" in row["note"]
    assert blackwell.built == []


def test_volta_skips_with_what_it_needs() -> None:
    row = _run(_gpu((7, 0)), _spec())
    assert row["status"] == "skipped"
    assert "CUDA 12.x" in row["note"]
