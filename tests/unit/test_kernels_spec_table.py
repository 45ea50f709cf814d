"""Spec throughput look-ups: known values for 9.0, None for anything unknown."""

from __future__ import annotations

from archline.characterize.kernels.spec_table import (
    SHARED_BYTES_PER_CLK_PER_SM,
    spec_bytes_per_clk_per_sm,
    spec_ops_per_clk_per_sm,
)
from tests.helpers.kernel_suite import full_specs


def test_hopper_values_from_the_programming_guide() -> None:
    cc = (9, 0)
    assert spec_ops_per_clk_per_sm(cc, "fp32") == 128
    assert spec_ops_per_clk_per_sm(cc, "fp64") == 64
    assert spec_ops_per_clk_per_sm(cc, "fp16x2") == 128
    assert spec_ops_per_clk_per_sm(cc, "int32.mul") == 64
    assert spec_ops_per_clk_per_sm(cc, "popc") == 16
    assert spec_ops_per_clk_per_sm(cc, "sfu") == 16
    assert spec_ops_per_clk_per_sm(cc, "cvt64") == 16
    assert spec_bytes_per_clk_per_sm(cc, "shared") == SHARED_BYTES_PER_CLK_PER_SM == 128


def test_unknown_capability_or_key_gives_none() -> None:
    assert spec_ops_per_clk_per_sm((6, 1), "fp32") is None
    assert spec_ops_per_clk_per_sm((9, 0), "no.such.unit") is None
    assert spec_ops_per_clk_per_sm((9, 0), None) is None
    assert spec_bytes_per_clk_per_sm((11, 0), "shared") is None


def test_catalogue_spec_keys_resolve_for_hopper() -> None:
    keys = {s.spec_key for s in full_specs().values() if s.group == "arithmetic" and s.spec_key}
    missing = {k for k in keys if spec_ops_per_clk_per_sm((9, 0), k) is None}
    # The guide's 16-bit row names half precision only; bf16x2 stays without a spec on purpose.
    assert missing == {"bf16x2"}


def test_every_target_architecture_has_a_column_and_only_hopper_is_confirmed() -> None:
    from archline.characterize.kernels.spec_table import SPEC_TABLE, UNCONFIRMED
    from archline.core.arch import ARCHS

    assert {a.cc for a in ARCHS.values()} == set(SPEC_TABLE)
    assert set(SPEC_TABLE) - UNCONFIRMED == {(9, 0)}
    # The per-SM FP32 lanes the whitepapers give: 64 on Turing and GA100, 128 from GA102 on.
    assert [spec_ops_per_clk_per_sm(cc, "fp32") for cc in sorted(SPEC_TABLE)] == [64, 64, 128, 128, 128, 128, 128]
