"""The counted energy model of ML kernels: tensor-core, cache and DRAM terms, a frozen protocol, roofline time.

Every component is an energy per counted unit above the constant power π0, from one
microbenchmark of the same run, ε_x = (E − π0·T)/count (:mod:`archline.model.components`):

    E = π0·T + ε_mem·Q_DRAM + ε_L2·(B_L2 − Q_DRAM) + ε_sh·B_sh + ε32·F32 + ε64·F64
        + ε_tc,fp64·F_fp64 + Σ_p a(α)·ε_tc,p·F_tc,p         (p = bf16, fp16, fp8; wgmma, random data)
        [+ ε_L1·(B_L1 − B_L2)] [+ ε_inst·I_other] [activity a(α) from the toggle sweep, else a = 1]

with Nsight Compute's counts of the kernel (tensor flops are ncu's ``sm__ops_path_tensor_src_*``,
which count a multiply-add as 2, as the calibration GEMMs confirm). Time is either measured or
predicted from the time roofline, T = max over units of count/(η_class·rate), rates measured in
the same run and η per class (tensor, CUDA core, memory) from the calibration kernels. Above
the board's power limit the cap-aware rule holds power at the limit: with a measured time,
E = P_lim·T; with a predicted time, T stretches to E_dyn/(P_lim − π0).

The **protocol** (:func:`calibrate`) is frozen code: it sees only the calibration kernels, picks
the optional terms (L1, instructions, activity) by their median |error| there, fits η and the
model's own error (the RMS relative error on calibration), and is then applied unchanged to the
held-out kernels (:func:`score`). :func:`calibrate_posthoc` is a variant chosen after that scoring
(:data:`POSTHOC_LABEL`): the cap at the calibration kernels' observed capped power, and the terms
chosen on the uncapped calibration kernels. :func:`calibrate_v2` is protocol v2 (docs/roofline.md
§10e, frozen before its scoring runs): the post-hoc rules, a capped dynamic energy κ instead of the
stretch, and the time source (time roofline or ncu's duration) chosen on calibration kernels.

Modules: ``counts`` (vocabulary and one kernel's ncu counts), ``machine`` (the machine's components
and a kernel's prediction), ``protocol`` (the protocols and the score); this package re-exports them.
"""

from __future__ import annotations

from archline.model.ml.counts import (
    ML_COMPONENT_SOURCES,
    OPTIONAL_TERMS,
    POSTHOC_LABEL,
    RANDOM_ACTIVITY,
    TENSOR_PRECISIONS,
    TOGGLE_PREFIX,
    UNIT_CLASS,
    MlCounts,
    Variant,
    counts_from_ncu_values,
    counts_from_row,
)
from archline.model.ml.machine import MeasuredKernel, MlModel, MlPrediction, machine
from archline.model.ml.protocol import (
    TIME_SOURCES,
    V2_LABEL,
    MlScore,
    calibrate,
    calibrate_posthoc,
    calibrate_v2,
    capped_kappa,
    score,
)

__all__ = [
    "ML_COMPONENT_SOURCES",
    "OPTIONAL_TERMS",
    "POSTHOC_LABEL",
    "RANDOM_ACTIVITY",
    "TENSOR_PRECISIONS",
    "TIME_SOURCES",
    "TOGGLE_PREFIX",
    "UNIT_CLASS",
    "V2_LABEL",
    "MeasuredKernel",
    "MlCounts",
    "MlModel",
    "MlPrediction",
    "MlScore",
    "Variant",
    "calibrate",
    "calibrate_posthoc",
    "calibrate_v2",
    "capped_kappa",
    "counts_from_ncu_values",
    "counts_from_row",
    "machine",
    "score",
]
