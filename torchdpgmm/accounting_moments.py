"""Backward-compatible home of the DP-EM moments accountant; it lives in :mod:`torchdpgmm.privacy.moments`."""
from torchdpgmm.privacy.moments import (  # noqa: F401
    DEFAULT_LAMBDAS,
    MomentsAccountant,
    calibrate_noise_multiplier,
    gaussian_log_moment,
    laplace_log_moment,
    linear_composition,
)

__all__ = ["DEFAULT_LAMBDAS", "laplace_log_moment", "gaussian_log_moment", "MomentsAccountant",
           "linear_composition", "calibrate_noise_multiplier"]
