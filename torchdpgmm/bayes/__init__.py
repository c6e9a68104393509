"""Gaussian mixtures and Bayes error under differential privacy (Xi, Kantarcioglu & Inan, CODASPY 2011).

* :mod:`.sensitivity` -- L1 sensitivities of Section 3 (mean, sum, median, variance, covariance matrix);
* :mod:`.release` -- truncation, normalisation, Laplace release of class statistics, PD repair (Section 5);
* :mod:`.error` -- Monte Carlo Bayes error of a plug-in classifier, Bhattacharyya and Chernoff bounds;
* :mod:`.theorem` -- Theorem 4.1 (probabilistic range of the Bhattacharyya distance in 1-D).
"""
from torchdpgmm.bayes.error import (
    bayes_error_mc,
    bhattacharyya_bound,
    bhattacharyya_distance,
    chernoff_bound,
    chernoff_exponent,
    equal_covariance_error,
    gaussian_class_log_prob,
    plugin_predict,
    sample_classes,
)
from torchdpgmm.bayes.release import (
    GaussianClasses,
    XiRelease,
    class_statistics,
    normalize,
    truncate,
    truncation_box,
    xi_release,
)
from torchdpgmm.bayes.sensitivity import (
    covariance_matrix_sensitivity,
    covariance_matrix_sensitivity_all_n,
    covariance_matrix_sensitivity_bounds,
    covariance_sensitivity_bounds,
    mean_sensitivity,
    mean_sensitivity_all_n,
    median_sensitivity,
    range_adjusted_sensitivities,
    sum_and_size_sensitivity,
    sum_sensitivity,
    variance_sensitivity_bounds,
)
from torchdpgmm.bayes._compat import xi_repair, xi_repair_reference
from torchdpgmm.bayes.theorem import (
    bhattacharyya_distance_1d,
    theorem41_bounds,
    theorem41_error_bound,
    theorem41_intervals,
)

__all__ = [
    "bayes_error_mc", "bhattacharyya_bound", "bhattacharyya_distance", "chernoff_bound", "chernoff_exponent",
    "equal_covariance_error", "gaussian_class_log_prob", "plugin_predict", "sample_classes",
    "GaussianClasses", "XiRelease", "class_statistics", "normalize", "truncate", "truncation_box", "xi_release",
    "covariance_matrix_sensitivity", "covariance_matrix_sensitivity_all_n", "covariance_matrix_sensitivity_bounds",
    "covariance_sensitivity_bounds", "mean_sensitivity", "mean_sensitivity_all_n", "median_sensitivity",
    "range_adjusted_sensitivities", "sum_and_size_sensitivity", "sum_sensitivity", "variance_sensitivity_bounds",
    "xi_repair", "xi_repair_reference",
    "bhattacharyya_distance_1d", "theorem41_bounds", "theorem41_error_bound", "theorem41_intervals",
]
