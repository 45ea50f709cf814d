"""Tensor-core kernels: verifiers on synthetic outputs, the SASS each architecture makes, data modes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from numpy.typing import NDArray

from archline.characterize.kernels import catalogue as cat
from archline.characterize.kernels.ptx import open_frame, retarget
from archline.characterize.kernels.spec_table import spec_ops_per_clk_per_sm
from archline.characterize.kernels.tensor import MMA_TYPES, mma_kernel, tensor_kernels
from archline.characterize.kernels.tensor_data import DATA_MODES, FORMATS, data_sweep, operand_words
from archline.characterize.kernels.tensor_wgmma import WGMMA_TYPES, wgmma_kernel
from archline.characterize.kernels.verify import expected_live
from archline.core.kernel import KernelSpec
from archline.hw import sass
from tests.helpers.kernel_suite import TOOLS_PRESENT

THREADS = 64
ITERS = 5
SEED = 1234


def _outputs(spec: KernelSpec, words: list[NDArray[np.uint32]]) -> dict[str, NDArray[np.generic]]:
    live = np.full(THREADS, expected_live(SEED, ITERS), dtype=np.uint32)
    return {"out": np.concatenate([live, *words]).astype(np.uint32)}


def _scalars() -> Mapping[str, int]:
    return {"threads": THREADS, "iters": ITERS, "seed": SEED}


def _word(value: float | int, integer: bool) -> NDArray[np.uint32]:
    if integer:
        return np.full(THREADS, value, dtype=np.int32).view(np.uint32)
    return np.full(THREADS, value, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("t", MMA_TYPES, ids=lambda t: t.key)
def test_mma_verifier_accepts_cancelled_accumulators_and_the_witness(t) -> None:  # type: ignore[no-untyped-def]
    spec = mma_kernel(t, "ones")
    assert spec.verify is not None
    k = t.shape[2]
    good = _outputs(spec, [_word(0, t.integer)] * 16 + [_word(k, t.integer)] * 2)
    assert spec.verify(good, _scalars()) is None
    wrong_witness = _outputs(spec, [_word(0, t.integer)] * 16 + [_word(k - 1, t.integer)] * 2)
    reason = spec.verify(wrong_witness, _scalars())
    assert reason is not None and f"K = {k}" in reason
    drift = _outputs(spec, [_word(1, t.integer)] * 16 + [_word(k, t.integer)] * 2)
    assert spec.verify(drift, _scalars()) is not None  # ones data must cancel exactly


def test_random_data_allows_rounding_drift_but_not_blow_up() -> None:
    t = next(t for t in MMA_TYPES if t.key == "bf16")
    spec = mma_kernel(t, "random")
    assert spec.verify is not None
    small = _outputs(spec, [_word(0.01, False)] * 16 + [_word(16, False)] * 2)
    assert spec.verify(small, _scalars()) is None
    huge = _outputs(spec, [_word(1e9, False)] * 16 + [_word(16, False)] * 2)
    assert spec.verify(huge, _scalars()) is not None
    nan = _outputs(spec, [_word(float("nan"), False)] * 16 + [_word(16, False)] * 2)
    assert spec.verify(nan, _scalars()) is not None


@pytest.mark.parametrize("t", WGMMA_TYPES, ids=lambda t: t.key)
def test_wgmma_verifier_checks_the_witness_and_liveness(t) -> None:  # type: ignore[no-untyped-def]
    spec = wgmma_kernel(t, "ones")
    assert spec.verify is not None
    good = _outputs(spec, [_word(0, t.integer)] * 4 + [_word(t.k, t.integer)] * 2)
    assert spec.verify(good, _scalars()) is None
    bad = _outputs(spec, [_word(0, t.integer)] * 4 + [_word(0, t.integer)] * 2)
    assert spec.verify(bad, _scalars()) is not None
    stale = dict(good)
    stale["out"] = good["out"].copy()
    stale["out"][:THREADS] ^= np.uint32(1)
    assert spec.verify(stale, _scalars()) is not None


def test_work_counts_dense_flops_per_thread() -> None:
    fp16 = mma_kernel(next(t for t in MMA_TYPES if t.key == "fp16"))
    # 16 MMAs of m16n8k16 per trip per warp: 16 · 2·16·8·16 / 32 threads.
    assert fp16.work.flops == 16 * 4096 / 32 == fp16.work.ops
    bf16 = wgmma_kernel(WGMMA_TYPES[0])
    # 8 wgmma m64n256k16 per trip per warpgroup of 128 threads.
    assert bf16.work.flops == 8 * 2 * 64 * 256 * 16 / 128


def test_spec_table_has_hopper_tensor_rates_and_nothing_for_unknown_gpus() -> None:
    assert spec_ops_per_clk_per_sm((9, 0), "tensor.bf16") == 4096.0
    assert spec_ops_per_clk_per_sm((9, 0), "tensor.fp8e4m3") == 2 * spec_ops_per_clk_per_sm((9, 0), "tensor.fp16")  # type: ignore[operator]
    assert spec_ops_per_clk_per_sm((7, 5), "tensor.bf16") is None


def test_skip_reasons_name_the_architecture() -> None:
    specs = {s.name: s for s in cat.catalogue()}
    assert cat.skip_reason(specs["tensor.wgmma.bf16"], (9, 0)) is None
    assert "sm_90a" in (cat.skip_reason(specs["tensor.wgmma.bf16"], (10, 0)) or "")
    assert "8.0 (sm_80" in (cat.skip_reason(specs["tensor.mma.bf16"], (7, 5)) or "")
    assert "emulates" in (cat.skip_reason(specs["tensor.mma.fp8e4m3"], (9, 0)) or "")
    assert cat.skip_reason(specs["tensor.mma.fp8e4m3"], (8, 9)) is None


def test_every_data_mode_has_a_sweep_point_or_is_a_reference() -> None:
    points = {m: data_sweep(m) for m in DATA_MODES}
    assert points["toggle-25"] == ("toggle_pct", 25.0)
    assert points["sparse-75"] == ("sparsity_pct", 75.0)
    assert points["random"] is None
    with pytest.raises(ValueError, match="sparse"):
        operand_words(open_frame("k_x"), "s8", "sparse-50", 2)
    with pytest.raises(ValueError, match="unknown operand data mode"):
        operand_words(open_frame("k_y"), "f16", "toggle-33", 2)


def test_formats_hold_one_and_keep_the_exponent_out_of_the_free_bits() -> None:
    for f in FORMATS.values():
        assert f.free & f.one == (0 if f.sign is not None else f.element_lsb() & f.free)
        if f.sign is not None:
            assert f.free & f.sign == f.sign


def test_retarget_rewrites_the_header_only() -> None:
    spec = tensor_kernels()[0]
    out = retarget(spec.ptx, version=(8, 7), target="sm_120")
    assert out.startswith(".version 8.7\n.target sm_120\n")
    with pytest.raises(ValueError):
        retarget("garbage", version=(8, 0), target="sm_90")


needs_tools = pytest.mark.skipif(not TOOLS_PRESENT, reason="ptxas or nvdisasm is not installed")


@needs_tools
@pytest.mark.parametrize("arch", ["sm_89", "sm_120"])
def test_fp8_mma_is_native_where_the_architecture_has_it(arch: str) -> None:
    specs = [mma_kernel(t) for t in MMA_TYPES if t.key.startswith("fp8")]
    ptxs = [retarget(s.ptx, version=(8, 7), target=arch) for s in specs]
    for spec, rep in zip(specs, sass.inspect_many(ptxs, arch=arch), strict=True):
        assert not sass.check_sass(spec, rep.instructions), spec.name


@needs_tools
def test_fp8_mma_on_hopper_is_emulated_which_is_why_it_is_skipped() -> None:
    spec = mma_kernel(next(t for t in MMA_TYPES if t.key == "fp8e4m3"))
    rep = sass.inspect_many([spec.ptx], arch="sm_90")[0]
    ops = {i.mnemonic.split(".")[0] for i in rep.instructions}
    assert "QMMA" not in ops and "F2FP" in ops


@needs_tools
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"])
def test_mma_sync_kernels_assemble_for_every_tensor_architecture(arch: str) -> None:
    cc = (int(arch[3:-1]), int(arch[-1]))
    specs = [s for s in tensor_kernels() if cat.skip_reason(s, cc) is None]
    ptxs = [retarget(s.ptx, version=(8, 7), target=arch) for s in specs]
    reps = sass.inspect_many(ptxs, arch=arch)
    assert specs
    for spec, rep in zip(specs, reps, strict=True):
        assert not sass.check_sass(spec, rep.instructions), (arch, spec.name)
