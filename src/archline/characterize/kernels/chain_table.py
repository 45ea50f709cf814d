"""Every chain definition by key: integer, carrier, floating-point and special-function chains."""

from __future__ import annotations

from archline.characterize.kernels.chains import ChainDef
from archline.characterize.kernels.chains_carrier import CARRIER_CHAINS
from archline.characterize.kernels.chains_fp import FP_CHAINS
from archline.characterize.kernels.chains_int import INT_CHAINS
from archline.characterize.kernels.chains_special import SPECIAL_CHAINS

__all__ = ["CHAINS"]

CHAINS: dict[str, ChainDef] = {**INT_CHAINS, **CARRIER_CHAINS, **FP_CHAINS, **SPECIAL_CHAINS}
