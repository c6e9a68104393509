"""The noise-aware covariance rule (``covariance_type="auto"``): full -> tied -> diagonal as one shrinkage continuum.

No fixed covariance structure suits every table: a 26-class table at eps 0.5 wants one pooled covariance
(``"tied"``: the K classes share one noisy block, K times the precision), a large 2-class table at eps 5
wants a covariance per class (``"full"``). This rule releases both and lets the released values decide.

**Release** (accounted in :mod:`torchdpgmm.release.sound`; two second-moment blocks):

* the class second moments ``Q_k = sum_{y=k} z z^T`` (the ``"full"`` block, noise ``sigma_F`` per diagonal
  entry, ``sigma_F/sqrt 2`` off the diagonal), and
* the pooled second moment ``P = sum_n z z^T`` (the ``"tied"`` block, noise ``sigma_P``),

with a budget split fixed from public facts only (:func:`auto_split`): the first-order KL split of Liu,
Scaglione & Peisert (2025) / :func:`torchdpgmm.release.sound.kl_split` for counts, sums and the pooled block (as for
``"tied"``), plus a class block whose precision ``1/sigma_F^2`` is a public multiple ``r`` of the pooled block's
(:func:`class_to_pooled_ratio`: ``r = max(0.3, 0.1 K min(1, 16 / d) max(1, min(eps, 5) / 2))`` from the public
number of classes K, dimension d and the release's epsilon); the counts then get at least :data:`COUNTS_FLOOR` of ``mu^2``
(the other blocks keep their ratios). The KL split prices count noise by the weights' KL only
(``Delta_c^2 / 2``), which leaves the counts under 1% of the budget when d is large (Ionosphere, Sonar,
Parkinsons, breast cancer, digits): on a small table the released counts are then pure noise, yet they set
the priors and divide every mean and covariance, and the Bayes classifier falls below predicting the majority
class. The floor costs the other blocks at most ``1 - sqrt(1 - 0.05) = 2.5%`` of precision in std.
One record touches ``P`` and one ``Q_k``: under add/remove
the whitened squared sensitivity of the pair is ``B^4 (1/sigma_F^2 + 1/sigma_P^2)``.

**Estimate** (post-processing of released values; torch ops only, no branch on a value):

0. *Counts.* Each noisy count is floored at ``c sigma_c`` (:func:`count_floor`, :func:`floored_counts`; ``sigma_c`` the std of the
   counts' noise, ``c = 3`` :data:`NOISE_SDS`, the constant of step 4) as well as at ``min_count``: a count within
   three noise standard deviations of zero is not resolved, and dividing a class's noisy sum and moments by it
   blows the class up (on a 128-row, 6-class table at eps 0.5 the counts' noise std is 34 against true counts of
   5 to 46, and the old floor of 2 let one class's mean be its noisy sum over 2). The floored count enters the
   weights, the means, the covariances and the noise levels below, all through ``n_k``; where every count is
   unresolved the weights are uniform and the means are the sums over ``c sigma_c``, pulled toward the centre.
   On large tables (``n_k >> c sigma_c``) it changes nothing. Validated on validation splits
   (``docs/results/covariance-rule.json``, ``count_floor_gain``; and against diffprivlib's GaussianNB on the same
   splits, ``docs/results/covariance-rule-gaussiannb.json``).
1. *Generalised least squares* of the class moments under the constraint ``sum_k Q_k = P``:
   ``Q~_k = Q^o_k + c`` with ``c = (P^o - sum_k Q^o_k) / (K + sigma_P^2 / sigma_F^2)``. The pooled moment
   ``sum_k Q~_k`` is the inverse-variance combination of ``P^o`` (variance ``sigma_P^2``) and
   ``sum_k Q^o_k`` (variance ``K sigma_F^2``), with per-entry variance
   ``v_P = (1/sigma_P^2 + 1/(K sigma_F^2))^-1``; each ``Q~_k`` has variance
   ``v_F = sigma_F^2 (1 - sigma_F^2 / (sigma_P^2 + K sigma_F^2))``.
2. Eq. (2) per class: ``Sigma~_k = (Q~_k - s_k s_k^T / n_k) / (n_k - 1)``, and the pooled within-class
   covariance ``Sigma~_pool = sum_k (n_k - 1) Sigma~_k / sum_k (n_k - 1)`` (Friedman 1989's regularised
   discriminant analysis between QDA and LDA).
3. The pooled covariance shrunk toward its diagonal (Ledoit & Wolf 2004), in correlation coordinates
   ``R = D^-1/2 Sigma~_pool D^-1/2`` (``D`` its diagonal floored at ``sqrt(v_P) / m``, ``m = sum_k (n_k - 1)``):
   ``rho = min(1, E||off(D^-1/2 N D^-1/2)||_F^2 / ||off(R)||_F^2)``,
   ``E||off(D^-1/2 N D^-1/2)||_F^2 = v_P ((sum_i 1/D_i)^2 - sum_i 1/D_i^2) / (2 m^2)``.
4. Each class shrunk toward the (shrunk) pooled covariance. The scalar form (the image pipeline's class stage, and
   the tables' rule before 2026-11-27) is ``(1 - l_k) Sigma~_k + l_k Sigma~_pool``, with
   ``l_k = (1/d) sum_i w_ki``, ``w_ki = x_ki / (1 + x_ki)``, ``x_ki = (c s_k / lambda_i)^2``: per eigen-direction
   ``i`` of ``Sigma~_pool`` (eigenvalue ``lambda_i``, floored at ``sqrt(d v_P) / m``), the noise variance over
   noise plus signal variance, averaged over the d directions (each enters a Gaussian classifier's
   log-likelihood once). The per-direction form (:data:`PER_DIRECTION`, the default) keeps the weights apart: with
   ``Sigma~_pool = V diag(lambda) V^T`` and ``D_k = V diag(1 - w_ki) V^T``,
   ``Sigma_k = Sigma~_pool + D_k^1/2 (Sigma~_k - Sigma~_pool) D_k^1/2`` (a swamped direction takes the pooled
   variance, a resolved one keeps the class's; PSD where ``Sigma~_k`` is, since ``Sigma_k = D_k^1/2 Sigma~_k
   D_k^1/2 + V diag(w_k lambda) V^T``; one weight for every direction gives the scalar form). On the tables'
   validation splits it scores higher (``docs/results/covariance-rule.json``: its columns ``auto`` (the rule) and
   ``auto_one_class_weight`` (the scalar form), ``mean_per_direction_gain``), so the tables' release uses it
   (:data:`PER_DIRECTION`); the image pipeline's class stage keeps the scalar form it was validated with
   (``class_weight="mean"``).
   ``s_k = sqrt(v_F) / (n_k - 1)`` is the noise std of a diagonal entry of ``Sigma~_k`` in any orthonormal basis
   (the noise's law is orthogonally invariant) and ``c = 3`` (:data:`NOISE_SDS`): a direction counts as
   noise-dominated when its variance is within three noise standard deviations, one public constant validated on
   both families (the tables: ``docs/results/covariance-rule.json``, exploration in
   ``docs/results/covariance-rule-weight.json``, written at commit 51f72d0 by ``scripts/covariance_rule_validation.py
   --noise-sds 3 --out ...`` and reproduced only there; Fashion-MNIST:
   ``docs/results/synth-validation-class-rule.json``). Earlier weights that summed the noise
   over all directions into one size lost: a James-Stein weight (``E||N||^2 / ||Sigma~_k - Sigma~_pool||^2``,
   Frobenius loss) left 5% of a class noise several times larger than the small eigenvalues (up to 17 points on
   tables); ``eta / (eta + 1)`` (the image pipeline's legacy rule, :mod:`torchdpgmm.pipelines.class_mixture`)
   leaves a residual ``(1 - l) eta -> 1`` as the noise grows (up to 30 points); and ``eta^2 / (eta^2 + 1)``
   with ``eta`` the spectral size of the noise whitened by ``Sigma~_pool`` let the few directions whose
   eigenvalue sits near the noise dominate (``l`` near 1 on Fashion-MNIST, where weights between 0.5 and 0.8
   do best: ``docs/results/class-rule-diagnosis.json`` as of commit e0da5c9). ``l_k -> 0`` as the noise vanishes (the empirical class
   covariance, ``"full"``), ``l_k -> 1`` when it dominates every direction (the pooled one, ``"tied"``, itself
   shrunk toward ``"diag"``).
5. The PSD repair of :mod:`torchdpgmm.release.sound` floors eigenvalues at ``sqrt(d)`` times the per-entry noise std
   of the shrunk estimate, ``sqrt((1 - l_k)^2 v_F / (n_k - 1)^2 + l_k^2 v_P / m^2)``.

6. The class means. Each released mean ``m_k = s_k / n_k`` (clipped coordinates) is projected onto the public
   clipping ball ``||m_k|| <= B`` (every true class mean of clipped records lies in it, a convex set, so the
   projection never increases a mean's Euclidean error; the analogue of diffprivlib's truncation of its noisy
   means into the bounds). Optionally (:data:`MEAN_SHRINKAGE`, OFF in the rule: see below) it is first shrunk
   toward the count-weighted pooled mean by a positive-part James-Stein weight (James & Stein 1961, Efron &
   Morris 1973) measured in the metric of the class's final (repaired) covariance ``Sigma_k``
   (:func:`shrunk_means`, applied by :mod:`torchdpgmm.release.sound` after step 5)::

       m_bar = sum_j w_j m_j,  w_j = n_j / sum_i n_i,     D_k = m_k - m_bar,
       t_kj  = (sigma_S^2 tr(Sigma_k^-1) + sigma_c^2 m_j^T Sigma_k^-1 m_j) / n_j^2,
       T_k   = sum_j w_j^2 t_kj + (1 - 2 w_k) t_kk,
       l_k   = clamp(((d - 2) / d) T_k / (D_k^T Sigma_k^-1 D_k), 0, 1),
       m_k  <- m_bar + (1 - l_k) D_k,   then projected onto the ball.

   ``n_k`` are the floored noisy counts, ``sigma_S`` / ``sigma_c`` the std of the sums' / counts' noise. To
   first order the noise of ``m_k`` is ``e_k = (e_s - m_k e_c) / n_k`` (independent over classes), with
   covariance ``(sigma_S^2 I + sigma_c^2 m_k m_k^T) / n_k^2``; ``t_kj`` is ``E e_j^T Sigma_k^-1 e_j`` and
   ``T_k`` the same for ``D_k``'s noise ``(1 - w_k) e_k - sum_{j != k} w_j e_j``. Approximations: the plug-in
   ``m_j`` in the count term, the first-order count noise (the released count stands for the true one), and
   ``(d - 2) / d`` times the trace for James-Stein's ``(d - 2) sigma^2`` (exact for isotropic whitened noise; no
   shrinkage for d <= 2). ``l_k -> 0`` as the noise vanishes, ``l_k -> 1`` (the pooled mean) when it dominates.
   Why it is off: James-Stein minimises the means' squared error, not the classifier's error. Where the noise
   dominates in squared norm, the noisy means still point along the class differences (a nearest-mean score
   averages the noise out over the d coordinates), and ``l_k -> 1`` throws that direction away; with all means
   at ``m_bar`` the Bayes classifier follows the noisy priors and covariances. On validation splits it lost on
   most rows, most on digits with 64 columns at eps 0.5, and gained on few (``docs/results/covariance-rule.json``:
   ``auto_mean_shrinkage_flipped`` and ``worst_mean_shrinkage_gain``).

Only public constants (``sigma_F``, ``sigma_P``, ``sigma_S``, ``sigma_c``, B, d, K) and released values (noisy
counts, sums and second moments) enter. Validated on validation splits only: ``scripts/covariance_rule_validation.py`` ->
``docs/results/covariance-rule.json``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["count_floor", "floored_counts", "CLASS_TO_POOLED", "CLASS_TO_POOLED_PER_CLASS", "CLASS_TO_POOLED_DIM",
           "class_to_pooled_ratio", "CLASS_TO_POOLED_EPSILON",
           "CLASS_TO_POOLED_EPSILON_MAX", "COUNTS_FLOOR", "MEAN_SHRINKAGE", "NOISE_SDS", "POOLED",
           "PER_DIRECTION", "auto_split", "combine_second_moments", "direction_weights", "shrinkage_weights", "diagonal_weight", "shrunk_covariances", "mean_shrinkage_weights", "shrunk_means"]

#: name of the pooled second-moment block in the record and the split
POOLED = "pooled_second_moment"
#: the least ratio of the class blocks' precision to the pooled block's (:func:`class_to_pooled_ratio`; a public
#: constant of the rule). As one ratio for every table, 0.3 had the highest mean accuracy on the validation splits,
#: scored as ``DPGaussianMixture.predict`` scores (rows pulled onto the release's ball; on rows as given ratio 1 had
#: looked best). The image pipeline's :data:`~torchdpgmm.pipelines.class_mixture.PIPELINE_CLASS_TO_POOLED` is 1,
#: chosen on Fashion-MNIST
CLASS_TO_POOLED = 0.3
#: the ratio's growth per class (:func:`class_to_pooled_ratio`)
CLASS_TO_POOLED_PER_CLASS = 0.1
#: the dimension above which the ratio's growth per class falls as ``1/d`` (:func:`class_to_pooled_ratio`)
CLASS_TO_POOLED_DIM = 16
#: the release's epsilon above which the ratio's growth per class rises in proportion to epsilon
#: (:func:`class_to_pooled_ratio`; ``math.inf``: no growth with epsilon)
CLASS_TO_POOLED_EPSILON = 2.0
#: the epsilon at which that growth stops (the largest epsilon it was validated at; beyond it the class blocks would
#: take the sums' and counts' budget without evidence that it pays)
CLASS_TO_POOLED_EPSILON_MAX = 5.0
#: step 6's James-Stein weights of the means (off in the rule: they lost on validation); ``False`` keeps the
#: released means, projected onto the clipping ball. The validation script flips it to compare
MEAN_SHRINKAGE = False
#: the counts' least share of mu^2 in the ``"auto"`` split (a public constant of the rule)
COUNTS_FLOOR = 0.05
#: noise standard deviations within which a released value counts as unresolved: a pooled eigen-direction in the
#: class weight (step 4), a count (step 0)
NOISE_SDS = 3.0
#: step 0 on (the rule); the validation script flips it to measure its gain
COUNT_FLOOR = True
#: step 4 per eigen-direction (module docstring) in the tables' release; off: one weight per class, the mean over the
#: directions (the image pipeline's class stage passes ``class_weight="mean"`` to the sound release, validated so).
#: The validation script flips it to compare
PER_DIRECTION = True


def count_floor(sigma_c: float, min_count: float) -> float:
    """Step 0's public floor of a count: ``max(min_count, NOISE_SDS * sigma_c)`` (``sigma_c`` the std of one
    count's noise); ``min_count`` alone with :data:`COUNT_FLOOR` off. Both are public numbers (checked here)."""
    for name, v in (("sigma_c", sigma_c), ("min_count", min_count)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return max(min_count, NOISE_SDS * sigma_c) if COUNT_FLOOR else min_count


def floored_counts(counts: torch.Tensor, sigma_c: float, min_count: float) -> torch.Tensor:
    """Step 0: the noisy counts ``(..., K)`` floored at :func:`count_floor`."""
    return torch.clamp(counts, min=count_floor(sigma_c, min_count))


def class_to_pooled_ratio(num_classes: int, dim: int, epsilon: float) -> float:
    """The class blocks' precision over the pooled block's in the ``"auto"`` split, from public facts only:
    ``r = max(CLASS_TO_POOLED, CLASS_TO_POOLED_PER_CLASS * K * min(1, CLASS_TO_POOLED_DIM / d) * g)`` with
    ``g = max(1, min(epsilon, CLASS_TO_POOLED_EPSILON_MAX) / CLASS_TO_POOLED_EPSILON)`` (0.3, 0.1, 16, 5 and 2), so
    up to epsilon 2 ``r = 0.3`` up to three classes, ``K / 10`` beyond in up to 16 dimensions, and ``1.6 K / d`` (at
    least 0.3) above 16 dimensions; from epsilon 2 to 5 the part that grows with K grows in proportion to epsilon,
    and stays at 2.5 times beyond. ``epsilon`` is the epsilon of the
    release that spends the split (the mixture stage's own in the two-stage release of
    :mod:`torchdpgmm.release.centring`).

    Why K: the pooled block serves all K classes, each class block one; in the GLS combination (step 1) the class
    blocks add ``r / K`` of the pooled block's precision to the pooled moment. With ``r = K / 10`` that contribution
    stays a tenth while each class's own block keeps pace as classes multiply; the pooled block pays for it, which
    costs most at small eps (below). Why ``1/d`` above 16: a
    class covariance's eigenvalues shrink with d while its noise does not, so in many dimensions the class blocks
    are swamped (step 4 gives them to the pooled covariance) and their budget is better spent on the pooled block.
    Why epsilon: the class blocks' noise falls as epsilon grows, so more of their directions are resolved (step 4
    keeps the class's variance there) and worth the budget, while the pooled block's gain from more budget saturates.
    Chosen on the tables' validation splits (``docs/results/class-to-pooled.json``,
    ``scripts/covariance_rule_validation.py --sweep-class-to-pooled``): against the one ratio 0.3 for every table,
    the mean accuracy over the 56 (table, eps) cells rises from 0.742 to 0.747 and the cells more than 1 point below
    the best fixed type fall from 12 to 4; the growth with epsilon (against the same rule without it: 6 cells, 0.746)
    changes only the epsilon-5 cells and raises each of them, most on Vowel (+1.7 points) and letter (+1.2). Those
    counts are on the noise seeds the rule was chosen on; on twenty fresh seeds
    (``docs/results/class-to-pooled-fresh-seeds.json``) the rule has 6 cells against 9 for the one ratio 0.3, and the
    growth with epsilon keeps its gains on letter and Vowel at epsilon 5 but not its count (5 cells without it). The cost
    of the K part is at small eps where the pooled block needed the budget (digits pooled to 16 columns -2.6 points
    at eps 0.5). Two- and three-class tables keep 0.3 up to epsilon 2."""
    for name, v in (("num_classes", num_classes), ("dim", dim)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < math.inf:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    grow = max(1.0, min(epsilon, CLASS_TO_POOLED_EPSILON_MAX) / CLASS_TO_POOLED_EPSILON)
    # rounded to 12 decimals: 0.1 * 3 is the floor 0.3 itself, not 0.30000000000000004 (which moves the noise scales)
    return round(max(CLASS_TO_POOLED, CLASS_TO_POOLED_PER_CLASS * num_classes * min(1.0, CLASS_TO_POOLED_DIM / dim)
                     * grow), 12)


def auto_split(base: dict[str, float], class_to_pooled: float | None = None, *, num_classes: int | None = None,
               dim: int | None = None, epsilon: float | None = None) -> dict[str, float]:
    """Budget fractions (of mu^2) of the four blocks from the three-block split ``base`` of ``"tied"``.

    ``base`` maps counts, sums, second_moments (the pooled block) to fractions; the class block
    ``second_moments`` gets ``class_to_pooled`` times the pooled block's share, then all are renormalised.
    Public facts only; without ``class_to_pooled`` it is :func:`class_to_pooled_ratio` of ``num_classes``, ``dim``
    and ``epsilon``, which are then required (a caller that forgot them would otherwise get another table's ratio
    silently). The counts get at least :data:`COUNTS_FLOOR` (the other three blocks scaled down together).
    """
    if class_to_pooled is None:
        if num_classes is None or dim is None or epsilon is None:
            raise TypeError("auto_split needs class_to_pooled, or num_classes, dim and epsilon for "
                            "class_to_pooled_ratio")
        class_to_pooled = class_to_pooled_ratio(num_classes, dim, epsilon)
    raw = {"counts": base["counts"], "sums": base["sums"], "second_moments": class_to_pooled * base["second_moments"],
           POOLED: base["second_moments"]}
    tot = sum(raw.values())
    out = {k: v / tot for k, v in raw.items()}
    counts = max(out["counts"], COUNTS_FLOOR)
    rest = (1.0 - counts) / (1.0 - out["counts"])
    return {k: counts if k == "counts" else v * rest for k, v in out.items()}


def combine_second_moments(q: torch.Tensor, p: torch.Tensor, sigma_f: float, sigma_p: float
                           ) -> tuple[torch.Tensor, float, float]:
    """GLS of the class moments ``q (..., K, d, d)`` given the pooled moment ``p (..., d, d)`` (module step 1).

    Returns ``(Q~ (..., K, d, d), v_F, v_P)``: the adjusted class moments (they sum to the combined pooled
    moment) and the per-entry noise variances of one class moment and of their sum (diagonal entries;
    off-diagonal entries have half).
    """
    K = q.shape[-3]
    ratio = (sigma_p / sigma_f) ** 2
    c = (p - q.sum(-3)) / (K + ratio)
    v_p = 1.0 / (1.0 / sigma_p ** 2 + 1.0 / (K * sigma_f ** 2))
    v_f = sigma_f ** 2 * (1.0 - 1.0 / (ratio + K))
    return q + c.unsqueeze(-3), v_f, v_p


def diagonal_weight(pool: torch.Tensor, dof: torch.Tensor, v_p: float) -> torch.Tensor:
    """Ledoit-Wolf weight ``rho (...)`` of the pooled covariance toward its diagonal (module step 3), measured
    in correlation coordinates ``D^-1/2 Sigma D^-1/2`` (``D`` its diagonal, floored at the noise); ``dof (...)``
    is ``sum_k (n_k - 1)``."""
    sd = torch.diagonal(pool, dim1=-2, dim2=-1)
    inv = 1.0 / torch.clamp(sd, min=torch.sqrt(torch.as_tensor(v_p, dtype=sd.dtype)) / dof.unsqueeze(-1))
    corr = pool * torch.sqrt(inv.unsqueeze(-1) * inv.unsqueeze(-2))
    off = corr - torch.diag_embed(torch.diagonal(corr, dim1=-2, dim2=-1))
    noise = v_p / 2 * (inv.sum(-1) ** 2 - (inv * inv).sum(-1)) / (dof * dof)
    return torch.clamp(noise / torch.clamp((off * off).sum((-2, -1)), min=1e-300), min=0.0, max=1.0)


def shrinkage_weights(pool: torch.Tensor, n_hat: torch.Tensor, v_f: float,
                      floor: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Weights ``l (..., K)`` of the class covariances toward ``pool (..., d, d)`` (module step 4):
    ``l_k = (1/d) sum_i x_ki / (1 + x_ki)``, ``x_ki = (NOISE_SDS s_k / lambda_i)^2``, with ``lambda_i`` the
    eigenvalues of ``pool`` (floored at ``floor``) and ``s_k = sqrt(v_f) / (n_k - 1)`` the noise std of a
    diagonal entry of the class covariance in any orthonormal basis; ``n_hat (..., K)`` the floored noisy counts,
    ``v_f`` the per-entry (diagonal) noise variance of a class moment."""
    x = _noise_ratio(torch.linalg.eigvalsh(pool), n_hat, v_f, floor)
    return (x / (1 + x)).mean(-1)


def _noise_ratio(evals: torch.Tensor, n_hat: torch.Tensor, v_f: float, floor: torch.Tensor | float) -> torch.Tensor:
    """``x_ki = (NOISE_SDS s_k / lambda_i)^2`` (..., K, d) of step 4 from the pooled eigenvalues ``evals``."""
    w = torch.clamp(n_hat - 1, min=1.0)
    floor = floor.unsqueeze(-1) if torch.is_tensor(floor) else torch.as_tensor(floor, dtype=evals.dtype)
    lam = torch.clamp(torch.maximum(evals, floor), min=1e-300)
    return NOISE_SDS ** 2 * v_f / (w * w).unsqueeze(-1) / (lam * lam).unsqueeze(-2)


def direction_weights(pool: torch.Tensor, n_hat: torch.Tensor, v_f: float,
                      floor: torch.Tensor | float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 4's per-direction weights (:data:`PER_DIRECTION`): ``(w (..., K, d), V (..., d, d))``, ``w_ki = x_ki /
    (1 + x_ki)`` over the eigen-directions ``V`` of ``pool``; their mean is :func:`shrinkage_weights` (to rounding).
    One decomposition, the sound release's (:func:`torchdpgmm.release.sound._eigh`: fixed Jacobi sweeps on an
    accelerator for small d, no convergence check read back by the host)."""
    from torchdpgmm.release.sound import _eigh

    evals, V = _eigh(pool)
    x = _noise_ratio(evals, n_hat, v_f, floor)
    return x / (1 + x), V


def shrunk_covariances(n_hat: torch.Tensor, sums: torch.Tensor, q: torch.Tensor, p: torch.Tensor,
                       sigma_f: float, sigma_p: float, *, per_direction: bool | None = None) -> dict[str, torch.Tensor]:
    """Steps 1-4 of the module docstring from released values: returns ``weights``, ``means``,
    ``covariances`` (..., K, d, d), the weights ``class_shrinkage`` (..., K) and ``diag_shrinkage`` (...),
    and ``noise_std`` (..., K): the per-entry noise std of each returned covariance (for the PSD floor)."""
    from torchdpgmm.mixture import moments_to_parameters

    q_adj, v_f, v_p = combine_second_moments(q, p, sigma_f, sigma_p)
    weights, means, cov = moments_to_parameters(n_hat, sums, q_adj, covariance_type="full")
    d = q.shape[-1]
    w = torch.clamp(n_hat - 1, min=1.0)
    dof = w.sum(-1)
    pool = (w[..., None, None] * cov).sum(-3) / dof[..., None, None]
    rho = diagonal_weight(pool, dof, v_p)[..., None, None]
    pool = (1 - rho) * pool + rho * torch.diag_embed(torch.diagonal(pool, dim1=-2, dim2=-1))
    floor = math.sqrt(d * v_p) / dof
    if PER_DIRECTION if per_direction is None else per_direction:  # public setting
        wdir, V = direction_weights(pool, n_hat, v_f, floor=floor)
        lam = wdir.mean(-1)  # the weights from the same decomposition, not a second one
        Vk = V.unsqueeze(-3)
        half = Vk @ torch.diag_embed(torch.sqrt(1 - wdir)) @ Vk.mT  # D_k^1/2, (..., K, d, d)
        poolk = pool.unsqueeze(-3)
        cov = poolk + half @ (cov - poolk) @ half
        cov = 0.5 * (cov + cov.mT)
    else:
        lam = shrinkage_weights(pool, n_hat, v_f, floor=floor)
        cov = (1 - lam[..., None, None]) * cov + lam[..., None, None] * pool.unsqueeze(-3)
    std = torch.sqrt((1 - lam) ** 2 * v_f / (w * w) + lam ** 2 * v_p / (dof * dof).unsqueeze(-1))
    return {"weights": weights, "means": means, "covariances": cov, "class_shrinkage": lam,
            "diag_shrinkage": rho[..., 0, 0], "noise_std": std}



def mean_shrinkage_weights(means: torch.Tensor, n_hat: torch.Tensor, precision: torch.Tensor, sigma_s: float,
                           sigma_c: float) -> torch.Tensor:
    """Positive-part James-Stein weights ``l (..., K)`` of the class means toward the pooled mean (module step 6).

    ``means (..., K, d)`` the released means in clipped coordinates, ``n_hat (..., K)`` the floored noisy counts,
    ``precision (..., K, d, d)`` the inverse of each class's covariance (the metric), ``sigma_s`` / ``sigma_c``
    the noise std of one coordinate of a sum / of a count."""
    d = means.shape[-1]
    w = n_hat / n_hat.sum(-1, keepdim=True)
    diff = means - (w.unsqueeze(-1) * means).sum(-2, keepdim=True)
    tr = torch.diagonal(precision, dim1=-2, dim2=-1).sum(-1)                           # (..., K): tr(P_k)
    quad = torch.einsum("...jd,...kde,...je->...kj", means, precision, means)          # m_j^T P_k m_j
    t = (sigma_s ** 2 * tr.unsqueeze(-1) + sigma_c ** 2 * quad) / (n_hat * n_hat).unsqueeze(-2)
    noise = (w * w).unsqueeze(-2).mul(t).sum(-1) + (1 - 2 * w) * torch.diagonal(t, dim1=-2, dim2=-1)
    signal = torch.einsum("...kd,...kde,...ke->...k", diff, precision, diff)
    return torch.clamp(max(d - 2, 0) / d * noise / torch.clamp(signal, min=1e-300), min=0.0, max=1.0)


def shrunk_means(means: torch.Tensor, n_hat: torch.Tensor, precision: torch.Tensor, sigma_s: float, sigma_c: float,
                 clip_bound: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Module step 6: ``(means (..., K, d), l (..., K))``, the class means shrunk toward the count-weighted pooled
    mean by :func:`mean_shrinkage_weights`, then projected onto the ball ``||m|| <= clip_bound`` (clipped
    coordinates)."""
    lam = mean_shrinkage_weights(means, n_hat, precision, sigma_s, sigma_c)
    w = n_hat / n_hat.sum(-1, keepdim=True)
    bar = (w.unsqueeze(-1) * means).sum(-2, keepdim=True)
    out = bar + (1 - lam).unsqueeze(-1) * (means - bar)
    norm = torch.linalg.vector_norm(out, dim=-1, keepdim=True)
    return out * torch.clamp(clip_bound / torch.clamp(norm, min=1e-300), max=1.0), lam
