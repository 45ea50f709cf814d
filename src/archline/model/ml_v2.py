"""Protocol v2 of the ML model (docs/roofline.md §10e): the observed cap, a capped dynamic energy κ, a time source.

Frozen before its scoring runs. Every step sees the calibration kernels only:

(a) the cap is the observed capped power (:func:`archline.model.ml.calibrate_posthoc`);
(b) the optional terms are scored on the uncapped calibration kernels (as there);
(c) κ, the dynamic energy a capped kernel spends as a fraction of its components' sum: the median
    of (E − π0·T)/E_dyn over the capped calibration kernels (1 where none is capped). A kernel whose
    predicted power exceeds the cap takes T = max(T_time, κ·E_dyn/(P_cap − π0)) and E = P_cap·T;
(d) the time a prediction starts from, the time roofline over η or Nsight Compute's duration,
    whichever gives the lower median |energy error| at predicted time on the calibration kernels
    (the roofline on a tie within 0.1 point; the roofline when a calibration kernel has no ncu time).
"""

from __future__ import annotations

from archline.model.ml import TIME_SOURCES, V2_LABEL, calibrate_v2, capped_kappa

__all__ = ["TIME_SOURCES", "V2_LABEL", "calibrate_v2", "capped_kappa"]
