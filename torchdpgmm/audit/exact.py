"""An exact check of one mechanism (no Monte Carlo): R1SMG's privacy loss on balls around the true value."""
from __future__ import annotations

import math

__all__ = ["r1smg_ball_delta"]


def r1smg_ball_delta(epsilon: float, delta: float, dim: int, sensitivity: float = 1.0, num_radii: int = 300
                     ) -> dict[str, float]:
    """Exact privacy loss of R1SMG (noise ``sqrt(sigma) z u``) on the events ``{||Y - f(D0)|| < r}``.

    For neighbours with ``||f(D0) - f(D1)|| = Delta`` and R1SMG calibrated for (epsilon, delta) (Ji & Li
    2024; ``sigma`` from :func:`torchdpgmm.mechanisms.r1smg_sigma`):
    ``P0(r) = 2 Phi(r / sqrt(sigma)) - 1`` and
    ``P1(r) = int phi(z) 2 F_u((r^2 - Delta^2 - sigma z^2) / (2 Delta sqrt(sigma) z)) dz`` over ``z > 0``,
    where ``(u_1 + 1)/2 ~ Beta((M-1)/2, (M-1)/2)`` is the law of one coordinate of a uniform unit vector.
    Any (epsilon, delta')-DP mechanism has ``P0(r) - e^epsilon P1(r) <= delta'`` for every r, so
    ``max_r [P0(r) - e^epsilon P1(r)]`` is a lower bound on the delta it actually achieves at epsilon.
    Returns that maximum, its radius and the two probabilities (scipy quadrature; independent of torch).
    """
    import numpy as np
    from scipy import integrate, stats

    from torchdpgmm.mechanisms import r1smg_sigma

    s = math.sqrt(float(r1smg_sigma(epsilon, delta, sensitivity, dim)))
    D = float(sensitivity)
    a = (dim - 1) / 2

    def cdf_u(v):
        return stats.beta.cdf((min(max(v, -1.0), 1.0) + 1) / 2, a, a)

    best = {"delta_lower": 0.0, "radius": float("nan"), "p0": 0.0, "p1": 0.0, "noise_scale": s}
    for r in np.geomspace(1e-4 * D, 10 * D, num_radii):
        p0 = 2 * stats.norm.cdf(r / s) - 1
        lo, hi = max(1e-300, (D - r) / s), (D + r) / s
        p1 = integrate.quad(lambda z: 2 * stats.norm.pdf(z) * cdf_u((r * r - D * D - s * s * z * z) / (2 * D * s * z)),
                            lo, hi, limit=200)[0]
        v = p0 - math.exp(epsilon) * p1
        if v > best["delta_lower"]:
            best.update(delta_lower=float(v), radius=float(r), p0=float(p0), p1=float(p1))
    return best
