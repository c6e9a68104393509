"""Empirical privacy auditing: Monte Carlo on two neighbouring datasets, Clopper-Pearson lower bound on epsilon.

An audit draws many releases of a mechanism on two neighbouring datasets, picks a threshold test of a
statistic on half of the draws and turns the test's error rates on the other half into a lower confidence
bound on the mechanism's epsilon (Kairouz et al. 2015; Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).
One concept per module:

* :mod:`~torchdpgmm.audit.bound` -- the Clopper-Pearson lower confidence bound on epsilon from the error
  counts of one threshold test;
* :mod:`~torchdpgmm.audit.statistics` -- distinguishing statistics: the learnt Fisher discriminant of the
  released GMM and attack statistics on a mechanism's support;
* :mod:`~torchdpgmm.audit.likelihood` -- the exact Neyman-Pearson statistic when the output density is
  known (the sound mode's noisy blocks);
* :mod:`~torchdpgmm.audit.pairs` -- neighbouring datasets to audit on (stress pairs, worst-case pairs);
* :mod:`~torchdpgmm.audit.tradeoff` -- tradeoff curves (Dong, Roth & Su 2019; Kairouz, Oh & Viswanath
  2015), the ceiling of an audit at a number of draws and the power report;
* :mod:`~torchdpgmm.audit.calibration` -- mu-GDP <-> (epsilon, delta) in scipy, independent of the
  calibrations under audit;
* :mod:`~torchdpgmm.audit.exact` -- an exact check of R1SMG (no Monte Carlo);
* :mod:`~torchdpgmm.audit.engine` -- :func:`audit` and :func:`audit_many`: draw, select, bound.

Every name below is importable from ``torchdpgmm.audit`` directly.
"""
from torchdpgmm.audit.bound import clopper_pearson_upper, epsilon_lower_bound
from torchdpgmm.audit.calibration import gdp_epsilon_exact, gdp_mu_exact
from torchdpgmm.audit.engine import AuditResult, audit, audit_many, from_batched_release
from torchdpgmm.audit.exact import r1smg_ball_delta
from torchdpgmm.audit.likelihood import (
    LikelihoodRatio,
    gaussian_log_ratio,
    laplace_log_ratio,
    noiseless_sound_blocks,
    sound_blocks,
    sound_log_ratio,
    sound_pair_mu,
    symmetric_gaussian_log_ratio,
    symmetric_laplace_log_ratio,
)
from torchdpgmm.audit.pairs import (
    NeighbourPair,
    extreme_clipping,
    hull_moving_point,
    outlier_label_flip,
    tiny_class,
    worst_case_add_remove,
    worst_case_replace_one,
)
from torchdpgmm.audit.statistics import (
    LinearDiscriminant,
    Statistic,
    mean_distance_statistic,
    psd_escape_statistic,
    release_features,
    support_escape_statistic,
)
from torchdpgmm.audit.tradeoff import audit_ceiling, dp_tradeoff, gdp_tradeoff, power_report

__all__ = [
    "AuditResult",
    "audit",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "Statistic",
    "LinearDiscriminant",
    "from_batched_release",
    "release_features",
    "NeighbourPair",
    "outlier_label_flip",
    "hull_moving_point",
    "tiny_class",
    "extreme_clipping",
    "support_escape_statistic",
    "psd_escape_statistic",
    "mean_distance_statistic",
    "audit_many",
    "r1smg_ball_delta",
    "LikelihoodRatio",
    "gaussian_log_ratio",
    "laplace_log_ratio",
    "symmetric_gaussian_log_ratio",
    "symmetric_laplace_log_ratio",
    "sound_blocks",
    "noiseless_sound_blocks",
    "sound_log_ratio",
    "sound_pair_mu",
    "gdp_tradeoff",
    "dp_tradeoff",
    "gdp_epsilon_exact",
    "gdp_mu_exact",
    "audit_ceiling",
    "power_report",
    "worst_case_add_remove",
    "worst_case_replace_one",
]
