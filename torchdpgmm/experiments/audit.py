"""Empirical privacy audits of every release mechanism and mode, and the utility price of the sound mode.

``torchdpgmm experiment audit``: for each mechanism (kl, laplace, gaussian, colored, r1smg), mode
("as-published", "sound") and shipped neighbour pair (:mod:`torchdpgmm.audit`: label-flip, replace-one
and add/remove pairs, including the sound mode's worst cases), draws releases on both datasets and
reports the Clopper-Pearson lower bound on epsilon at the claimed delta (95%, threshold chosen on a
held-out half; Jagielski, Ullman & Oprea 2020). Sound rows add the exact likelihood-ratio
(Neyman-Pearson) statistic of the noisy blocks (Nasr et al. 2021) and a power column: what the same
test certifies against a mechanism exactly at the claim (the mu-GDP tradeoff curve of Dong, Roth & Su
2019, or the (eps, delta)-DP curve for pure-DP claims) and, for Gaussian noise, the pair's exact
epsilon. The as-published components that the published accounting relies on are audited in isolation
as well (random mapping of the weights, Wishart covariances, R1SMG, the ``ln(2/delta)`` Gaussian rule),
with an exact (non Monte Carlo) number beside the audit where one exists.

``torchdpgmm experiment sound-utility``: KL(released || fitted) versus epsilon on the synthetic study of
Liu, Scaglione & Peisert (2025), Sec. V-A (K=5, d=3, N=1000) for the sound mode beside the as-published
curves.

Rows of ``audit``: ``mechanism, mode, claimed_epsilon, claimed_delta, audited_epsilon_lower, neighbours,
relation, adjacency, statistic, fpr, fnr, fpr_upper, fnr_upper, num_draws, num_evaluation,
claim_ceiling_epsilon, exceeds_claim, status`` (+ ``pair_mu, pair_exact_epsilon, pair_ceiling_epsilon,
lr_epsilon_lower`` on sound rows, ``exact_*`` on component rows). A bound above the claim is a proof (at
95% confidence) that the claim is false for that pair; a bound below the claim proves nothing about
soundness, and the ceiling says how far below the truth any audit with that many draws must stay.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import torch

from torchdpgmm import audit as A
from torchdpgmm._validation import check_no_repeats
from torchdpgmm.experiments import ExperimentConfig, Study, StudyResult, mean_ci
from torchdpgmm.experiments.realdata import quick_option

MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
MODES = ("as-published", "sound")
SOUND_AUDITED = ("gaussian", "kl", "laplace")
PAIRS = ("outlier-flip", "hull-point", "tiny-class", "extreme-clip", "worst-add-remove", "worst-label-flip",
         "worst-same-class")


def _floats(s: str) -> list[float]:
    return [float(v) for v in str(s).split(",") if v.strip()]


def _names(s: str) -> list[str]:
    return [v.strip() for v in str(s).split(",") if v.strip()]


# ----------------------------------------------------------------------------------------------------
# audit study
# ----------------------------------------------------------------------------------------------------

def _add_audit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draws", type=int, default=None,
                   help="sound-mode releases per dataset (default 100000; quick 2000)")
    p.add_argument("--worst-draws", type=int, default=None,
                   help="sound-mode releases per dataset on the worst-case pairs, where the audit's power is "
                        "measured (default 2 x draws)")
    p.add_argument("--sound-noise", default=None, choices=("continuous", "discrete"),
                   help="noise flavour of the sound release (default: the release's own default)")
    p.add_argument("--sound-mechanisms", default=",".join(SOUND_AUDITED),
                   help="mechanisms audited in sound mode (default gaussian,kl,laplace; 'colored' draws the same "
                        "noise as 'gaussian' there)")
    p.add_argument("--published-draws", type=int, default=None,
                   help="as-published and component releases per dataset (default 10000; quick 600)")
    p.add_argument("--epsilons", default="1.0", help="claimed epsilons, comma separated (default 1.0)")
    p.add_argument("--delta", type=float, default=1e-5, help="claimed delta (default 1e-5)")
    p.add_argument("--clip-bound", type=float, default=10.0, help="sound-mode clipping bound B (default 10)")
    p.add_argument("--mechanisms", default=",".join(MECHANISMS), help="mechanisms to audit")
    p.add_argument("--modes", default=",".join(MODES), help="modes to audit")
    p.add_argument("--pairs", default=",".join(PAIRS), help="neighbour pairs")
    p.add_argument("--batch-size", type=int, default=None,
                   help="releases per batched call (default: sized to a 256 MiB memory budget)")
    p.add_argument("--no-components", action="store_true", help="skip the component audits")
    p.add_argument("--slow-draws", type=int, default=None,
                   help="draws for as-published 'colored' (an SDP per draw; default min(published draws, 4000))")


def make_pairs(generator: torch.Generator, clip_bound: float, quick: bool = False) -> dict[str, A.NeighbourPair]:
    """The shipped neighbour pairs (K=3 classes, d=3) used by the study: label flips, replace-one and
    add/remove, including the sound mode's worst cases (:func:`torchdpgmm.audit.worst_case_add_remove`)."""
    n = 30 if quick else 50
    d = 3  # R1SMG on a class mean needs d > 2
    B = clip_bound
    return {
        "outlier-flip": A.outlier_label_flip(num_per_class=n, dim=d, generator=generator),
        "hull-point": A.hull_moving_point(num_per_class=n, dim=d, generator=generator),
        "tiny-class": A.tiny_class(num_per_class=n, dim=d, tiny=d + 2, generator=generator),  # as-published needs N_k > d
        "extreme-clip": A.extreme_clipping(num_per_class=n, dim=d, clip_bound=B, generator=generator),
        "worst-add-remove": A.worst_case_add_remove(num_per_class=n, dim=d, clip_bound=B, generator=generator),
        "worst-label-flip": A.worst_case_replace_one(num_per_class=n, dim=d, clip_bound=B, generator=generator),
        "worst-same-class": A.worst_case_replace_one(num_per_class=n, dim=d, clip_bound=B, kind="same-class",
                                                     generator=generator),
    }


def _fit(X, y, K, mask=None):
    """Per-class weights, means, covariances (divisor n_k - 1, 0 for classes with < 2 records) and counts
    of the raw records: the noiseless reference each attack statistic compares a release with."""
    X = X.to(torch.float64)
    oh = torch.nn.functional.one_hot(y.long(), K).to(torch.float64)
    if mask is not None:
        oh = oh * mask.to(torch.float64).unsqueeze(-1)
    n = oh.sum(-2)
    mean = (oh.transpose(-1, -2) @ X) / n.clamp(min=1).unsqueeze(-1)
    D = X.unsqueeze(-3) - mean.unsqueeze(-2)
    cov = (D * oh.transpose(-1, -2).unsqueeze(-1)).transpose(-1, -2) @ D / (n - 1).clamp(min=1)[..., None, None]
    return n / n.sum(-1, keepdim=True), mean, cov, n


def statistics_for(pair: A.NeighbourPair, num_classes: int) -> dict[str, Any]:
    """Distinguishing statistics fixed before any draw: a quadratic discriminant of the whole release,
    the random-mapping support escape (weights), the Wishart PSD escape (covariances) and the
    log-distance of the released means to each dataset's means (singular noise such as R1SMG)."""
    _, m0, c0, n0 = _fit(pair.X0, pair.y0, num_classes, pair.mask0)
    _, m1, c1, n1 = _fit(pair.X1, pair.y1, num_classes, pair.mask1)
    return {
        "lda-quadratic": A.LinearDiscriminant(A.release_features, quadratic=True),
        "weights-support": A.support_escape_statistic(n0, n1, int(pair.X0.shape[-2])),
        "cov-psd-escape": A.psd_escape_statistic(c0, c1),
        "mean-distance": A.mean_distance_statistic(m0, m1),
    }


def sound_adjacency(pair: A.NeighbourPair) -> str:
    """The sound mode's adjacency under which the pair is a neighbour (a label flip is a replace-one)."""
    return "add-remove" if pair.relation == "add-remove" else "replace-one"


def _sound_mechanism(mechanism: str, eps: float, delta: float, clip_bound: float, K: int, adjacency: str,
                     noise: str | None = None, *, d: int):
    """The sound release of the noisy blocks, eigenvalue floor off so that they read back exactly
    (:func:`torchdpgmm.audit.sound_blocks`); post-processing can only lower epsilon. Returns
    ``(mechanism(D, n, g), noise scales in data units)``; raises (e.g. for r1smg) before any draw."""
    from torchdpgmm.release.sound import release_sound, sound_statistics

    opts = dict(clip_bound=clip_bound, adjacency=adjacency, mechanism=mechanism)
    if noise is not None:
        opts["noise"] = noise

    def mech(D, n, g):
        out, _ = sound_statistics(D[0], D[1], K, eps, delta, generator=g, mask=D[2] if len(D) > 2 else None,
                                  eig_floor=float("-inf"), num_draws=n, **opts)
        return out

    # the noise scales are public (data-independent, but they depend on d: the kl split and the Laplace scales):
    # read them from a release on placeholder data of the pair's dimension (until 2026-12-01 d = 2 against the
    # pairs' 3, so the kl and Laplace likelihood-ratio statistics were not the exact Neyman-Pearson ones)
    rel = release_sound(torch.zeros(4, d, dtype=torch.float64), torch.arange(4) % K, K, eps, delta,
                        generator=torch.Generator().manual_seed(0), **opts)
    return mech, rel


def _published_mechanism(mechanism: str, eps: float, delta: float, K: int):
    from torchdpgmm.release import release  # the as-published release (another helper's module)

    designs: dict[int, Any] = {}

    def mech(D, n, g):
        X, y = D[0], D[1]
        Xn, yn = X.expand((n,) + tuple(X.shape)), y.expand((n,) + tuple(y.shape))
        if mechanism == "kl":
            # Algorithm 1 depends on the data only: solve it once per dataset and reuse it for every draw
            key = id(X)
            if key not in designs:
                designs[key] = release(X, y, K, eps, delta, mechanism="kl", mode="as-published",
                                       generator=torch.Generator(device=X.device).manual_seed(0)).design
            return release(Xn, yn, K, eps, delta, mechanism="kl", mode="as-published", generator=g,
                           design=_expand_design(designs[key], n))
        return release(Xn, yn, K, eps, delta, mechanism=mechanism, mode="as-published", generator=g)

    return mech


def _expand_design(design: Any, n: int) -> Any:
    """A data-only design broadcast to ``n`` identical trials (every tensor field gets a leading dim)."""
    import dataclasses

    changes = {f.name: getattr(design, f.name).expand((n,) + tuple(getattr(design, f.name).shape))
               for f in dataclasses.fields(design) if torch.is_tensor(getattr(design, f.name))}
    return dataclasses.replace(design, **changes)


def _row_from(result: A.AuditResult, **kw) -> dict[str, Any]:
    row = dict(kw)
    row.update(
        audited_epsilon_lower=result.epsilon_lower,
        exceeds_claim=bool(result.epsilon_lower > kw["claimed_epsilon"]),
        fpr=result.fpr, fnr=result.fnr, fpr_upper=result.fpr_upper, fnr_upper=result.fnr_upper,
        threshold=result.threshold, direction=result.direction, confidence=result.confidence,
        num_evaluation=result.num_evaluation, histogram=result.histogram, status="ok",
    )
    return row


def _power(row: dict[str, Any], gaussian: bool, pair_mu: float | None = None) -> dict[str, Any]:
    """The power columns of a row: the ceiling of the same test (same evaluation draws, same confidence)."""
    rep = A.power_report(row["claimed_epsilon"], row["claimed_delta"], row["num_evaluation"],
                         confidence=row["confidence"], gaussian=gaussian, pair_mu=pair_mu)
    return {k: v for k, v in rep.items() if k not in ("num_evaluation", "confidence")}


def _sound_row(P: A.NeighbourPair, mech: str, eps: float, delta: float, B: float, K: int, draws: int,
               bs: int | None, g: torch.Generator, base: dict[str, Any], noise: str | None = None) -> dict[str, Any]:
    """One sound-mode row: the LR statistic beside the generic ones (Bonferroni), plus the power columns."""
    adjacency = sound_adjacency(P)
    try:
        fn, rec = _sound_mechanism(mech, eps, delta, B, K, adjacency, noise, d=P.X0.shape[-1])
    except (ImportError, ValueError, NotImplementedError) as exc:
        return dict(base, adjacency=adjacency, audited_epsilon_lower=None, exceeds_claim=None,
                    status=f"unavailable: {type(exc).__name__}: {exc}")
    # the exact Neyman-Pearson statistic, and a generic discriminant as an independent cross-check (the
    # support, PSD and mean-distance attacks target the random mapping, Wishart and R1SMG, none of which
    # the sound mode uses; fewer statistics also mean a milder Bonferroni correction)
    stats = {"likelihood-ratio": A.sound_log_ratio(P.dataset0, P.dataset1, K, B, rec),
             "lda-quadratic": A.LinearDiscriminant(A.release_features, quadratic=True)}
    best, res, allr = A.audit_many(fn, P.dataset0, P.dataset1, stats, num_draws=draws, delta=delta,
                                   generator=g, batch_size=bs)
    row = _row_from(res, adjacency=adjacency, statistic=best, **base)
    row["per_statistic"] = {k: r.epsilon_lower for k, r in allr.items()}
    row["lr_epsilon_lower"] = allr["likelihood-ratio"].epsilon_lower
    ex = getattr(rec, "extras", None) or getattr(rec, "extra", None) or {}
    row["noise"] = ex.get("noise", {}).get("noise", "continuous")
    gaussian = mech != "laplace"
    pair_mu = A.sound_pair_mu(P.dataset0, P.dataset1, K, B, rec) if gaussian else None
    row.update(_power(row, gaussian, pair_mu))
    return row


def _published_row(P: A.NeighbourPair, mech: str, eps: float, delta: float, K: int, draws: int,
                   g: torch.Generator, base: dict[str, Any]) -> dict[str, Any]:
    """One as-published row (label-flip adjacency; other pairs are not neighbours there)."""
    if P.relation != "label-flip":
        return dict(base, adjacency="label-flip", audited_epsilon_lower=None, exceeds_claim=None,
                    status="n/a: not a neighbour under the published (label-level) adjacency")
    try:
        fn = _published_mechanism(mech, eps, delta, K)
        best, res, allr = A.audit_many(fn, P.dataset0, P.dataset1, statistics_for(P, K), num_draws=draws,
                                       delta=delta, generator=g, batch_size=1000)
    except Exception as exc:  # a release that fails on a pair is a finding, not a crash
        return dict(base, adjacency="label-flip", audited_epsilon_lower=None, exceeds_claim=None,
                    status=f"error: {type(exc).__name__}: {exc}")
    row = _row_from(res, adjacency="label-flip", statistic=best, **base)
    row["per_statistic"] = {k: r.epsilon_lower for k, r in allr.items()}
    row.update(_power(row, gaussian=False))
    return row


def _component_rows(pairs, eps, delta, draws, bs, K, g, quick=False) -> list[dict[str, Any]]:
    """Audits of the as-published building blocks in isolation (most favourable budget: all of eps)."""
    from torchdpgmm.mechanisms import mapping, r1smg, wishart
    from torchdpgmm.release.sound import gdp_epsilon

    rows: list[dict[str, Any]] = []
    base = dict(mode="as-published (component)", claimed_epsilon=eps, claimed_delta=delta, num_draws=draws)
    for name, P in pairs.items():
        if P.relation != "label-flip":
            continue
        N = int(P.X0.shape[-2])
        _, _, c0, n0 = _fit(P.X0, P.y0, K)
        _, _, c1, n1 = _fit(P.X1, P.y1, K)
        # random mapping of the weights with eps0 = eps (the whole budget)
        n0l, n1l = n0.round().long(), n1.round().long()

        def rm(D, n, gen, _N=N):
            counts = D
            return {"weights": mapping.random_mapping(counts.expand(n, K), eps, lam=1e-3, generator=gen).double() / _N}

        res = A.audit(rm, n0l, n1l, A.support_escape_statistic(n0, n1, N), num_draws=draws, delta=delta,
                      generator=g, batch_size=bs)
        supp = torch.cat([mapping.mapping_support(n0l), mapping.mapping_support(n1l)])
        lr = (mapping.log_pmf(supp, n0l, eps) - mapping.log_pmf(supp, n1l, eps)).abs().max().item()
        rows.append(_row_from(res, mechanism="random-mapping (weights, eq. 15)", neighbours=name,
                              neighbours_description=P.description, relation=P.relation, adjacency="label-flip",
                              statistic="weights-support", exact_max_log_ratio=lr, **base))
        # Wishart covariances (eq. 6) with the eq. (9) charge 3 gamma_k / (2 N_k) = eps, rows in the unit ball
        scale = float(torch.linalg.vector_norm(torch.cat([P.X0, P.X1]), dim=-1).max())
        _, _, s0, _ = _fit(P.X0 / scale, P.y0, K)
        _, _, s1, _ = _fit(P.X1 / scale, P.y1, K)
        d = P.X0.shape[-1]
        g0, g1 = 2 * n0 * eps / 3, 2 * n1 * eps / 3

        def wi(D, n, gen, _d=d):
            cov, gam = D
            return {"covariances": cov + wishart(gam.expand(n, K), _d, generator=gen)}

        _, res, _ = A.audit_many(
            wi, (s0, g0), (s1, g1),
            {"cov-psd-escape": A.psd_escape_statistic(s0, s1),
             "lda-quadratic": A.LinearDiscriminant(lambda o: o["covariances"].flatten(1), quadratic=True)},
            num_draws=draws, delta=delta, generator=g, batch_size=bs)
        rows.append(_row_from(res, mechanism="wishart (covariances, eq. 6/9)", neighbours=name,
                              neighbours_description=P.description + " (rows scaled into the unit ball)",
                              relation=P.relation, adjacency="label-flip", statistic="cov-psd-escape|lda", **base))
    # R1SMG on a unit-sensitivity vector query in R^M
    for M in (3, 6, 18):
        def rq(D, n, gen, _M=M):
            x = torch.zeros(n, _M, dtype=torch.float64, device=gen.device)  # drawn where gen lives
            x[:, 0] = D
            return r1smg(x, 1.0, eps, delta, generator=gen)

        res = A.audit(rq, 0.0, 1.0, lambda y: y.norm(dim=-1), num_draws=draws, delta=delta, generator=g,
                      batch_size=bs)
        ex = A.r1smg_ball_delta(eps, delta, M, num_radii=40 if quick else 300)
        rows.append(_row_from(res, mechanism=f"r1smg (M={M})", neighbours="unit shift f(D1) = f(D0) + e_1",
                              neighbours_description="any query of L2 sensitivity 1", relation="sensitivity-1",
                              adjacency="any", statistic="distance to f(D0)",
                              exact_delta_at_claimed_epsilon=ex["delta_lower"], **base))
    # the paper's calibration rule sigma = sqrt(2 ln(2/delta)) / eps (condition 10) on a scalar query
    sigma = math.sqrt(2 * math.log(2 / delta)) / eps

    def gq(D, n, gen):
        from torchdpgmm.mechanisms import normal_noise

        return D + normal_noise((n,), sigma, gen, dtype=torch.float64, device=gen.device)  # the noise layer's sampler

    res = A.audit(gq, 0.0, 1.0, lambda s: s, num_draws=draws, delta=delta, generator=g, batch_size=bs)
    rows.append(_row_from(res, mechanism="gaussian (paper rule sqrt(2 ln(2/delta))/eps)", neighbours="unit shift",
                          neighbours_description="scalar query of sensitivity 1", relation="sensitivity-1",
                          adjacency="any", statistic="identity",
                          exact_epsilon=gdp_epsilon(delta, 1.0 / sigma), **base))
    return rows


def _audit_options(config: ExperimentConfig) -> dict[str, Any]:
    o, pick = config.options, config.pick  # --quick shrinks only what the user did not give

    def given(key: str, default: Any) -> Any:  # a typed 0 is a value to check, never "use the default"
        return default if o.get(key) is None else o[key]

    opts = dict(
        draws=int(pick("draws", given("draws", 100_000), 2000)),
        published_draws=int(pick("published_draws", given("published_draws", 10_000), 600)),
        eps_list=_floats(o.get("epsilons", "1.0")), delta=float(o.get("delta", 1e-5)),
        B=float(o.get("clip_bound", 10.0)), mechs=_names(o.get("mechanisms", ",".join(MECHANISMS))),
        modes=_names(o.get("modes", ",".join(MODES))), pair_names=_names(o.get("pairs", ",".join(PAIRS))),
        bs=o.get("batch_size"), components=not o.get("no_components"),
        sound_mechs=_names(o.get("sound_mechanisms", ",".join(SOUND_AUDITED))),
        sound_noise=o.get("sound_noise"),
    )
    opts["worst_draws"] = int(given("worst_draws", 2 * opts["draws"]))
    opts["slow_draws"] = int(given("slow_draws", min(opts["published_draws"], 4000)))
    for key in ("draws", "published_draws", "worst_draws", "slow_draws"):
        if opts[key] < 4:  # audit() splits each dataset's draws into a selection and an evaluation part
            raise ValueError(f"--{key.replace('_', '-')} must be >= 4 (each dataset's draws are split into "
                             f"selection and evaluation), got {opts[key]}")
    if not (math.isfinite(opts["delta"]) and 0 < opts["delta"] < 1):
        raise ValueError(f"--delta must lie in (0, 1), got {opts['delta']:g}")
    for flag, key in (("--mechanisms", "mechs"), ("--sound-mechanisms", "sound_mechs"), ("--modes", "modes"),
                      ("--pairs", "pair_names")):
        check_no_repeats(flag, opts[key])   # a repeat audits (and lists) the same cell twice
    if opts["bs"] is not None and int(opts["bs"]) < 1:
        raise ValueError("--batch-size must be >= 1")
    for m in opts["mechs"] + opts["sound_mechs"]:
        if m not in MECHANISMS:
            raise ValueError(f"unknown mechanism {m!r}; choose from {MECHANISMS}")
    from torchdpgmm.release.sound import SOUND_MECHANISMS

    if opts["modes"] == ["sound"] and not any(m in SOUND_MECHANISMS for m in opts["sound_mechs"]):
        # a mechanism without a sound mode gets a row saying so beside others; alone, nothing would be audited
        raise ValueError(f"--sound-mechanisms {','.join(opts['sound_mechs'])} has no sound mode, so --modes sound "
                         f"audits nothing; choose from {SOUND_MECHANISMS}")
    for m in opts["modes"]:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; choose from {MODES}")
    for p in opts["pair_names"]:
        if p not in PAIRS:
            raise ValueError(f"unknown pair {p!r}; choose from {PAIRS}")
    return opts


def run_audit(config: ExperimentConfig) -> StudyResult:
    """The audit study (module docstring): sound rows, as-published rows, component rows."""
    o = _audit_options(config)
    K, delta, B = 3, o["delta"], o["B"]
    g = config.generator()
    # public fixtures drawn on the host (CPU generator), then moved to the study's device (the generator rule)
    all_pairs = {k: P.to(config.device) for k, P in make_pairs(config.host_generator(1), B, config.quick).items()}
    pairs = {k: all_pairs[k] for k in o["pair_names"]}
    rows: list[dict[str, Any]] = []
    from tqdm.auto import tqdm

    cells = len(o["eps_list"]) * sum(len(pairs) for mode in o["modes"] for mech in o["mechs"]
                                     if mode != "sound" or mech in o["sound_mechs"])
    bar = tqdm(total=cells, desc="audit", unit="pair", leave=False, disable=None)  # shown on a terminal only
    for eps in o["eps_list"]:
        for mode in o["modes"]:
            for mech in o["mechs"]:
                if mode == "sound" and mech not in o["sound_mechs"]:
                    continue
                for name, P in pairs.items():
                    bar.set_postfix_str(f"eps={eps:g} {mode} {mech} {name}")
                    nd = o["published_draws"]
                    if mode == "sound":
                        nd = o["worst_draws"] if name.startswith("worst") else o["draws"]
                    if mode == "as-published" and mech == "colored":
                        nd = o["slow_draws"]
                    base = dict(mechanism=mech, mode=mode, claimed_epsilon=eps, claimed_delta=delta,
                                neighbours=name, neighbours_description=P.description, relation=P.relation,
                                num_draws=nd)
                    if mode == "sound":
                        rows.append(_sound_row(P, mech, eps, delta, B, K, nd, o["bs"], g, base, o["sound_noise"]))
                    else:
                        rows.append(_published_row(P, mech, eps, delta, K, nd, g, base))
                    bar.update()
        if o["components"] and "as-published" in o["modes"]:
            comp = _component_rows(pairs, eps, delta, o["published_draws"], o["bs"] or 4000, K, g, config.quick)
            for r in comp:
                r.update(_power(r, gaussian=False))
            rows.extend(comp)
    bar.close()
    notes = []
    bad = [r for r in rows if r.get("mode") == "sound" and r.get("exceeds_claim")]
    if bad:
        notes.append(f"SOUND MODE EXCEEDED ITS CLAIM in {len(bad)} rows: investigate")
    notes.append("bounds are one-sided 95% Clopper-Pearson, threshold chosen on a held-out half, "
                 "Bonferroni over the statistics of a row; sound rows audit the noisy blocks "
                 "(eigenvalue floor off), whose post-processing can only lower epsilon")
    cfg = {"draws": o["draws"], "worst_draws": o["worst_draws"], "sound_mechanisms": o["sound_mechs"],
           "sound_noise": o["sound_noise"],
           "published_draws": o["published_draws"], "slow_draws": o["slow_draws"],
           "clip_bound": B, "delta": delta, "epsilons": o["eps_list"]}
    return StudyResult(rows=rows, config=cfg, notes=notes, plot=_plot_audit)


def _plot_audit(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per mode (sound, as-published, as-published components), one bar per audited pair: the 95%
    Clopper-Pearson lower bound on epsilon (red where it exceeds the claim), a tick at the claimed epsilon.
    A bound of exactly 0 (audited, no evidence) is drawn as a diamond at 0 so it is not mistaken for a pair
    that was never audited; never-audited pairs (not neighbours under the mode's adjacency) are counted in
    their panel's title, not drawn."""
    import textwrap

    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("audited_epsilon_lower") is not None]
    if not ok:
        return
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    modes.sort(key=lambda m: (m != "sound", m))
    per = {m: [r for r in ok if r["mode"] == m] for m in modes}
    skipped = {m: [r for r in rows if r["mode"] == m and r.get("audited_epsilon_lower") is None] for m in modes}
    modes = [m for m in modes if per[m] or skipped[m]]
    heights = [max(len(per[m]), 1) for m in modes]
    fig = plt.figure(figsize=(11, 0.2 * sum(heights) + 1.1 * len(modes) + 2.0))
    gs = fig.add_gridspec(len(modes), 1, height_ratios=heights)
    xmax = max(max(r["audited_epsilon_lower"] for r in ok), max(r["claimed_epsilon"] for r in ok)) * 1.08
    for i, m in enumerate(modes):
        ax = fig.add_subplot(gs[i, 0])
        rr = sorted(per[m], key=lambda r: (r["mechanism"], r["neighbours"], r["claimed_epsilon"]))
        y = list(range(len(rr)))
        vals = [r["audited_epsilon_lower"] for r in rr]
        colors = ["tab:red" if r.get("exceeds_claim") else "tab:blue" for r in rr]
        ax.barh(y, vals, color=colors, height=0.7)
        zeros = [j for j, v in zip(y, vals) if v == 0]
        ax.scatter([0.0] * len(zeros), zeros, marker="D", s=14, facecolor="white", edgecolor="k", zorder=3,
                   label="lower bound exactly 0 (audited: no evidence against the claim)")
        ax.scatter([r["claimed_epsilon"] for r in rr], y, marker="|", color="k", s=120, zorder=3,
                   label="claimed epsilon")
        ax.set_yticks(y)
        ax.set_yticklabels([f"{r['mechanism']} | {r['neighbours']} | claim eps={r['claimed_epsilon']:g} | "
                            f"{r['num_draws']:,} draws" for r in rr], fontsize=7.5)
        ax.set_ylim(-0.7, max(len(rr), 1) - 0.3)
        ax.invert_yaxis()
        ax.set_xlim(0, xmax)
        ax.grid(True, axis="x", alpha=0.3)
        title = f"mode: {m} ({len(rr)} audited pairs"
        if skipped[m]:
            why = skipped[m][0].get("status", "not audited").removeprefix("n/a: ")
            title += f"; {len(skipped[m])} pairs not audited, not drawn: {why}"
        ax.set_title(textwrap.fill(title + ")", 85), fontsize=9, loc="left")
        if i == 0:
            ax.legend(fontsize=7.5, loc="lower right", framealpha=0.9)
        if i == len(modes) - 1:
            ax.set_xlabel(textwrap.fill("epsilon: bar = 95% Clopper-Pearson lower bound from the audit (red: above "
                                        "the claim, which disproves the claim for that pair); tick = claimed epsilon",
                                        100))
    deltas = sorted({r.get("claimed_delta") for r in ok if r.get("claimed_delta") is not None})
    fig.suptitle(textwrap.fill(
        "Empirical privacy audit of every mechanism and mode: 95% lower bound on epsilon per neighbour pair "
        f"(delta = {', '.join(f'{d:g}' for d in deltas)}; threshold chosen on a held-out half, Jagielski, Ullman & "
        "Oprea 2020). A bound below the claim proves nothing about soundness.", 130), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------
# sound-utility study
# ----------------------------------------------------------------------------------------------------

def synthetic_data(trials: int, N: int, K: int, d: int, generator: torch.Generator, min_count: int | None = None):
    """Liu, Scaglione & Peisert (2025), Sec. V-A: weights ~ Dirichlet(1), means ~ U[-10,10]^d, covariances ~ Wishart(d+1, I).

    Every class gets at least ``min_count`` records (default d+2) so that eq. (2c) is defined: counts are
    ``min_count + Multinomial(N - K min_count, weights)``. Returns ``X (T,N,d), y (T,N)`` (float64).
    """
    from torchdpgmm.mixture import LabeledGMM

    mc = d + 2 if min_count is None else min_count
    dt, dev = torch.float64, generator.device  # drawn where the generator lives (the generator rule)
    e = -torch.log(torch.rand(trials, K, generator=generator, dtype=dt, device=dev).clamp_min(1e-300))
    w = e / e.sum(-1, keepdim=True)
    means = 20 * torch.rand(trials, K, d, generator=generator, dtype=dt, device=dev) - 10
    G = torch.randn(trials, K, d, d + 1, generator=generator, dtype=dt, device=dev)
    covs = G @ G.transpose(-1, -2)
    idx = torch.multinomial(w, N - K * mc, replacement=True, generator=generator)
    counts = mc + torch.nn.functional.one_hot(idx, K).sum(-2)
    gmm = LabeledGMM(w, means, covs, validate_args=False)
    X, y, _ = gmm.sample_counts(counts, generator)
    return X, y


def _add_utility_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epsilons", default=None, help="epsilon grid (default 0.1..10; quick 0.1,0.2)")
    p.add_argument("--delta", type=float, default=1e-5, help="delta (default 1e-5)")
    p.add_argument("--clip-bound", type=float, default=25.0,
                   help="sound-mode clipping bound B (public; default 25, covering means in [-10,10]^3)")
    p.add_argument("--sound-mechanisms", default="gaussian,kl,laplace", help="sound-mode mechanisms")
    p.add_argument("--published-mechanisms", default=",".join(MECHANISMS), help="as-published mechanisms")
    p.add_argument("--num-records", type=int, default=None, help="N (default 1000, paper Sec. V-A; quick 300)")
    p.add_argument("--adjacency", default="replace-one", choices=("replace-one", "add-remove"),
                   help="sound-mode adjacency (default replace-one: a label flip is a replace-one neighbour, "
                        "the closest match to the as-published label-level claim)")


def _utility_mechanisms(o: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The sound and the as-published mechanism lists, checked (one line): known names with that mode, no
    repeat (it would write a second row of the same cell, from other draws), not both empty (no rows)."""
    from torchdpgmm.release.sound import SOUND_MECHANISMS

    lists = []
    for flag, key, default, allowed in (("--sound-mechanisms", "sound_mechanisms", "gaussian,kl,laplace",
                                         SOUND_MECHANISMS),
                                        ("--published-mechanisms", "published_mechanisms", ",".join(MECHANISMS),
                                         MECHANISMS)):
        text = str(o.get(key, default))
        names = _names(text)
        if names and not all(v.strip() for v in text.split(",")):
            raise ValueError(f"{flag} must not hold an empty value (two commas in a row, or one at an end), "
                             f"got {text!r}")
        bad = [m for m in names if m not in allowed]
        if bad:
            what = "has no sound mode" if bad[0] in MECHANISMS else "is an unknown mechanism"
            raise ValueError(f"{flag}: {bad[0]!r} {what} (choose from {', '.join(allowed)})")
        check_no_repeats(flag, names)
        lists.append(names)
    if not any(lists):
        raise ValueError("--sound-mechanisms and --published-mechanisms are both empty: the study would write no rows")
    return lists[0], lists[1]


def _utility_sizes(config: ExperimentConfig, trials: int, N: int, K: int, d: int) -> None:
    """Refuse (one line) a ``--num-records`` the generator cannot fill and, on CPU, a ``--trials`` whose one batch
    of data cannot fit the available memory (every trial is drawn and released at once)."""
    from torchdpgmm.montecarlo import synthetic_data_bytes_per_trial
    from torchdpgmm.sweep import device_free_bytes

    need = K * (d + 2)
    if N <= need:  # every class first gets d + 2 records, then N - K (d + 2) >= 1 are drawn from the weights
        raise ValueError(f"--num-records must be > {need} (each of the K = {K} classes first gets d + 2 = {d + 2} "
                         f"records), got {N}")
    # on CPU the allocator may overcommit and the system swap; a CUDA allocation that cannot fit fails at once
    # (run_utility turns it into one line)
    free = device_free_bytes("cpu") if torch.device(config.device).type == "cpu" else None
    size = trials * synthetic_data_bytes_per_trial(N, K, d)
    if free is not None and size > free:
        raise ValueError(f"--trials {trials} at --num-records {N} needs at least {size / 2 ** 30:.3g} GiB at once "
                         f"(the study draws every trial in one batch) but {free / 2 ** 30:.3g} GiB are free on "
                         f"{config.device}; use fewer trials")


def run_utility(config: ExperimentConfig) -> StudyResult:
    """KL(released || fitted) against epsilon on the synthetic data of Liu, Scaglione & Peisert (2025),
    Sec. V-A: the sound mode (``--adjacency``, default replace-one; public bound B) beside the as-published curves (label flips).

    Its data come from this module's :func:`synthetic_data` (d + 2 records per class, then a multinomial), not
    from :func:`torchdpgmm.montecarlo.synthetic_data` (d + 1 per class by whole-trial redraws) that fig1-fig5
    and the sweep use: the same Sec. V-A model under another small-class rule, so its numbers are not those of
    fig2 at the same settings."""
    from torchdpgmm.release.sound import release_sound

    o = config.options
    trials = int(config.trials or 100)
    trials = int(config.pick("trials", trials, min(trials, 4)))  # an explicit --trials beats --quick
    eps_list = _floats(quick_option(config, "epsilons", "0.1,0.2,0.5,1,2,5,10", "0.1,0.2"))
    N = int(quick_option(config, "num_records", 1000, 300))
    delta = float(o.get("delta", 1e-5))
    B = float(o.get("clip_bound", 25.0))
    adjacency = str(o.get("adjacency", "replace-one"))
    K, d = 5, 3
    sound_mechs, published_mechs = _utility_mechanisms(o)
    _utility_sizes(config, trials, N, K, d)
    try:
        return _utility_rows(config, trials, eps_list, N, delta, B, adjacency, K, d, sound_mechs, published_mechs,
                             release_sound)
    except RuntimeError as exc:
        from torchdpgmm.sweep import _is_oom

        if not _is_oom(exc):
            raise
        raise ValueError(f"out of memory on {config.device} with --trials {trials} at --num-records {N} (the study "
                         "draws every trial in one batch): use fewer trials") from None


def _utility_rows(config, trials, eps_list, N, delta, B, adjacency, K, d, sound_mechs, published_mechs,
                  release_sound) -> StudyResult:
    X, y = synthetic_data(trials, N, K, d, config.generator(0))
    X, y = X.to(config.device), y.to(config.device)
    g = config.generator(1)
    clipped = float((torch.linalg.vector_norm(X, dim=-1) > B).double().mean())
    rows: list[dict[str, Any]] = []
    notes = [f"fraction of records clipped at B={B:g}: {clipped:.4f}"]
    kl_design = None
    for eps in eps_list:
        for mech in sound_mechs:
            rel = release_sound(X, y, K, eps, delta, clip_bound=B, adjacency=adjacency, mechanism=mech,
                                generator=g)
            rows.append(_utility_row("sound", mech, eps, delta, _kl(rel, X, y), trials, N, B,
                                     str(rel.privacy.adjacency.value)))
        for mech in published_mechs:
            try:
                from torchdpgmm.release import release

                kw = {}
                if mech == "kl" and kl_design is not None and hasattr(kl_design, "at"):
                    kw["design"] = kl_design.at(eps)  # one SDP per dataset, reused across epsilons
                rel = release(X, y, K, eps, delta, mechanism=mech, mode="as-published", generator=g, **kw)
                if mech == "kl":
                    kl_design = rel.design
            except ImportError as exc:  # an optional dependency missing here: a row says so; any other error is raised
                rows.append(dict(mode="as-published", mechanism=mech, epsilon=eps, delta=delta,
                                 status=f"unavailable: {type(exc).__name__}: {exc}"))
                note = f"as-published {mech} NOT RUN: {type(exc).__name__}: {exc}"
                if note not in notes:   # said on the way out too (run_study warns about NOT RUN notes)
                    notes.append(note)
                continue
            rows.append(_utility_row("as-published", mech, eps, delta, _kl(rel, X, y), trials, N, None, "label-flip"))
    return StudyResult(rows=rows, config={"trials": trials, "epsilons": eps_list, "N": N, "K": K, "d": d, "clip_bound": B},
                       notes=notes, plot=_plot_utility)


def _kl(rel: Any, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """KL(released || fitted): the explicit, non-private evaluation call where the release no longer carries
    it (``torchdpgmm.release.evaluation.evaluate``), else the release's own ``kl``."""
    if getattr(rel, "kl", None) is not None:
        return rel.kl
    from torchdpgmm.release.evaluation import evaluate

    return evaluate(rel, X, y).kl


def _utility_row(mode, mech, eps, delta, kl, trials, N, B, adjacency):
    from torchdpgmm.experiments.plotting import log_interval_columns

    kl = kl.detach().to("cpu", torch.float64)
    finite = torch.isfinite(kl)
    ci = mean_ci(kl[finite]) if int(finite.sum()) > 1 else {"mean": float("nan"), "ci_low": float("nan"),
                                                             "ci_high": float("nan")}
    return dict(mode=mode, mechanism=mech, epsilon=eps, delta=delta, adjacency=adjacency, clip_bound=B,
                kl_mean=float(ci["mean"]), kl_ci_low=float(ci["ci_low"]), kl_ci_high=float(ci["ci_high"]),
                kl_median=float(kl[finite].median()) if bool(finite.any()) else float("nan"),
                nonfinite=int((~finite).sum()), trials=trials, N=N, status="ok",
                # the interval the log-scale figure draws (delta method on the log mean, see plotting.py)
                **{f"kl_{k}": v for k, v in log_interval_columns(float(ci["mean"]), float(ci["ci_low"]),
                                                                 float(ci["ci_high"])).items()})


def _plot_utility(rows: list[dict[str, Any]], path: Path) -> None:
    """KL vs epsilon, sound and as-published, through :func:`torchdpgmm.experiments.plotting.plot_curves`.

    One legend entry per (mechanism, mode), each saying what its mode protects (so no entry describes the
    other mode); the title names the sound mode's adjacency and says so when it is not the command line's
    default (add-remove). On the log axis the interval drawn is the rows' ``kl_ci_low_log``/``kl_ci_high_log``
    where the rows carry it (written by the study since they exist), else the same delta-method interval
    computed from ``kl_ci_low``/``kl_ci_high`` (:func:`torchdpgmm.experiments.plotting.log_interval`)."""
    from torchdpgmm.experiments.plotting import log_interval_columns, plot_curves, series_from_rows
    from torchdpgmm.release.sound import DEFAULT_ADJACENCY

    ok = []
    for r in rows:
        if r.get("status") != "ok":
            continue
        lab = f"{r['mechanism']} [{r['mode']}]"
        logs = ({"ci_low_log": r["kl_ci_low_log"], "ci_high_log": r["kl_ci_high_log"]} if "kl_ci_low_log" in r
                else log_interval_columns(r["kl_mean"], r["kl_ci_low"], r["kl_ci_high"]))
        ok.append(dict(r, label=lab, mean=r["kl_mean"], ci_low=r["kl_ci_low"], ci_high=r["kl_ci_high"], **logs))
    ok.sort(key=lambda r: (r["mode"] != "sound", r["label"]))
    first = ok[0] if ok else {}
    sound = [r for r in ok if r["mode"] == "sound"]
    B = next((r["clip_bound"] for r in sound), None)
    adj = sorted({str(r["adjacency"]) for r in sound})
    notes = {}
    for r in ok:
        if r["mode"] == "sound":
            notes[r["label"]] = (f"sound mode: records clipped to norm <= B={B:g}, record-level DP, "
                                 f"{r['adjacency']} adjacency")
        else:
            base = "Algorithm 1 of Liu, Scaglione & Peisert (2025)" if r["mechanism"] == "kl" else "baseline"
            notes[r["label"]] = f"as-published mode ({base}): label-level claim (one label flipped), not a verified DP guarantee"
    settings = {k: first.get(k) for k in ("N", "delta")}
    settings.update(K=first.get("K", 5), d=first.get("d", 3),
                    trials=max((int(r["trials"]) for r in ok), default=0), clip_bound=B)
    default = getattr(DEFAULT_ADJACENCY, "value", str(DEFAULT_ADJACENCY))
    adj_txt = ", ".join(adj) if adj else "none"
    if adj and adj != [default]:
        adj_txt += f"; the command line's default is {default}"
    return plot_curves(series_from_rows(ok, "epsilon", drawn=("ci_low_log", "ci_high_log")), path,
                       x_label="epsilon (privacy budget)", y_label="KL(released || fitted) in nats, log scale",
                       title=f"Sound mode (record-level, {adj_txt}) vs as-published (label-level), Sec. V-A data",
                       settings=settings, variant_notes=notes, logx=True)


STUDIES = {
    "audit": Study("audit", run_audit,
                   "empirical privacy audit (Clopper-Pearson lower bound on epsilon) of every mechanism and mode",
                   add_arguments=_add_audit_arguments),
    "sound-utility": Study("sound-utility", run_utility,
                           "KL vs epsilon of the sound mode beside the as-published curves (synthetic, Sec. V-A)",
                           add_arguments=_add_utility_arguments, default_trials=100),
}


# ----------------------------------------------------------------------------------------------------
# markdown tables for docs/privacy.md (filled by scripts/privacy_doc.py from the studies' JSON)
# ----------------------------------------------------------------------------------------------------

def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
            return f"{v:.2e}"
        return f"{v:.{nd}f}"
    return str(v)


def _exact_cell(r: dict[str, Any]) -> str:
    if r.get("exact_max_log_ratio") is not None:
        return f"max ln-ratio {_fmt(r['exact_max_log_ratio'])}"
    if r.get("exact_delta_at_claimed_epsilon") is not None:
        return f"delta at claimed eps >= {_fmt(r['exact_delta_at_claimed_epsilon'])}"
    if r.get("exact_epsilon") is not None:
        return f"true eps {_fmt(r['exact_epsilon'])}"
    if r.get("pair_exact_epsilon") is not None:
        approx = "~" if r.get("noise") == "discrete" else ""
        return f"pair eps {approx}{_fmt(r['pair_exact_epsilon'])} (mu {_fmt(r.get('pair_mu'))})"
    return ""


def _status_cell(r: dict[str, Any]) -> str:
    status = r.get("status", "")
    if status.startswith("unavailable") or status.startswith("error"):
        status = status[:90] + ("..." if len(status) > 90 else "")
    return status


def audit_markdown(rows: list[dict[str, Any]], modes: tuple[str, ...] | None = None) -> str:
    """The audit rows as a markdown table: claimed vs audited epsilon, the likelihood-ratio bound, the
    power (the same test's ceiling against a mechanism exactly at the claim) and the exact value."""
    head = ("| mode | mechanism | neighbours (adjacency) | claimed eps (delta) | audited eps, 95% lower bound "
            "| above claim? | statistic | LR bound | ceiling at claim | exact | draws (held-out) | status |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    order = {"sound": 0, "as-published": 1, "as-published (component)": 2}
    sel = [r for r in rows if modes is None or r.get("mode") in modes]
    for r in sorted(sel, key=lambda r: (order.get(r.get("mode"), 3), r.get("claimed_epsilon", 0))):
        aud = r.get("audited_epsilon_lower")
        flag = "" if aud is None else ("**YES**" if r.get("exceeds_claim") else "no")
        draws = "" if aud is None else f"{r.get('num_draws')} ({r.get('num_evaluation')})"
        lines.append(
            f"| {r.get('mode')} | {r.get('mechanism')} | {r.get('neighbours')} ({r.get('adjacency', '')}) | "
            f"{_fmt(r.get('claimed_epsilon'), 2)} ({_fmt(r.get('claimed_delta'))}) | {_fmt(aud)} | {flag} | "
            f"{r.get('statistic') or ''} | {_fmt(r.get('lr_epsilon_lower')) if r.get('lr_epsilon_lower') is not None else ''} | "
            f"{_fmt(r.get('claim_ceiling_epsilon')) if aud is not None else ''} | {_exact_cell(r)} | {draws} | "
            f"{_status_cell(r)} |")
    return "\n".join(lines)


def audit_summary_markdown(rows: list[dict[str, Any]]) -> str:
    """Bullet points computed from the audit rows (largest sound ratio, violations, worst-case power)."""
    ok = [r for r in rows if r.get("audited_epsilon_lower") is not None]
    sound = [r for r in ok if r["mode"] == "sound"]
    out = []
    if sound:
        top = max(sound, key=lambda r: r["audited_epsilon_lower"] / r["claimed_epsilon"])
        over = sum(bool(r["exceeds_claim"]) for r in sound)
        out.append(f"- Sound mode: {over} of {len(sound)} audited rows above the claim. The bound closest to its "
                   f"claim (relative to it): {_fmt(top['audited_epsilon_lower'])} at claimed eps "
                   f"{_fmt(top['claimed_epsilon'], 2)} ({top['mechanism']}, {top['neighbours']}).")
        worst = sorted((r for r in sound if r["neighbours"].startswith("worst")),
                       key=lambda r: (r["claimed_epsilon"], r["neighbours"], r["mechanism"]))
        if worst:
            out.append("\nPower on the worst-case pairs (likelihood-ratio statistic; `ceiling`: what the same test, "
                       "with the same held-out draws and confidence, certifies against a mechanism exactly at the "
                       "claim, resp. exactly at the pair's own epsilon):\n")
            out.append("| mechanism (noise) | pair (adjacency) | claimed eps | LR bound | ceiling at claim | pair's exact eps "
                       "| ceiling at pair | draws per dataset |\n|---|---|---|---|---|---|---|---|")
            for r in worst:
                out.append(f"| {r['mechanism']} ({r.get('noise', 'continuous')}) | {r['neighbours']} ({r['adjacency']}) | "
                           f"{_fmt(r['claimed_epsilon'], 2)} | "
                           f"{_fmt(r.get('lr_epsilon_lower'))} | {_fmt(r.get('claim_ceiling_epsilon'))} | "
                           f"{_fmt(r.get('pair_exact_epsilon'))} | {_fmt(r.get('pair_ceiling_epsilon'))} | "
                           f"{r['num_draws']} |")
            out.append("")
    pub = [r for r in ok if r["mode"] != "sound"]
    if pub:
        over = [r for r in pub if r["exceeds_claim"]]
        out.append(f"- As-published (full releases and components): {len(over)} of {len(pub)} audited rows above "
                   f"the claim.")
    return "\n".join(out)


def records_markdown(rows: list[dict[str, Any]]) -> str:
    """The privacy records of tiny releases (scripts/privacy_records.py): one row per mode and mechanism."""
    head = ("| family | release | record mode | adjacency | accountant | covered | noised blocks | notes |\n"
            "|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['family']} | {r['release']} | {r['call_mode']} | - | - | - | - | "
                         f"not released: {_code(r['status'])} |")
            continue
        blocks = "; ".join(f"{b['name']}: {b['mechanism']}, sens {_fmt(b['sensitivity'])} ({b['norm']}), "
                           f"scale {_fmt(b['noise_scale'])}" + (f" x{b['count']}" if b.get("count", 1) != 1 else "")
                           for b in (r.get("blocks") or []))
        notes = "<br>".join(_code(n) for n in (r.get("notes") or []))
        lines.append(f"| {r['family']} | {r['release']} | {r.get('mode')} | {r.get('adjacency')} | "
                     f"{_code(r.get('accountant') or '')} | {'yes' if r.get('covered') else 'no'} | {blocks or '-'} | "
                     f"{notes} |")
    return "\n".join(lines)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: Any) -> str:
    """Record text quoted verbatim (inline code: it is the record's wording, not a measured result)."""
    t = _cell(text).replace("`", "'")
    return f"`{t}`" if t else ""


def utility_markdown(rows: list[dict[str, Any]]) -> str:
    """KL(released || fitted) per epsilon: one column per (mode, mechanism)."""
    ok = [r for r in rows if r.get("status") == "ok"]
    cols = sorted({(r["mode"], r["mechanism"]) for r in ok}, key=lambda c: (c[0] != "sound", c[1]))
    eps = sorted({r["epsilon"] for r in ok})
    by = {(r["mode"], r["mechanism"], r["epsilon"]): r for r in ok}
    head = "| eps | " + " | ".join(f"{m} ({mo})" for mo, m in cols) + " |"
    lines = [head, "|---|" + "---|" * len(cols)]
    for e in eps:
        cells = []
        for mo, m in cols:
            r = by.get((mo, m, e))
            cells.append("-" if r is None else
                         f"{_fmt(r['kl_mean'])} [{_fmt(r['kl_ci_low'])}, {_fmt(r['kl_ci_high'])}]; median {_fmt(r['kl_median'])}")
        lines.append(f"| {_fmt(e, 2)} | " + " | ".join(cells) + " |")
    missing = [r for r in rows if r.get("status") != "ok"]
    if missing:
        lines.append("")
        lines.append("Not run: " + "; ".join(sorted({f"{r['mechanism']} ({r['mode']}): {r['status'][:80]}" for r in missing})))
    return "\n".join(lines)
