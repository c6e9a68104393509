"""Collect the PrivacyRecord of a tiny release in every mode and mechanism, write them as JSON.

    python scripts/privacy_records.py --out results/privacy-records
    python scripts/privacy_doc.py --records results/privacy-records/privacy_records.json ...

Each release runs on a small synthetic labeled dataset (public bounds given explicitly); nothing in the
JSON is typed by hand: ``adjacency``, ``accountant``, ``covered``, ``notes`` and ``blocks`` are read from
the records that the releases themselves attach. A release that cannot be made (refused, or an API
missing from this build) becomes a row with its error message, so the table shows it instead of hiding
it. ``scripts/privacy_doc.py`` renders the JSON as the table of docs/privacy.md.
"""
from __future__ import annotations

import argparse
import inspect
import json
import platform
from pathlib import Path
from typing import Any, Callable

import torch

EPS, DELTA, K, CLIP = 1.0, 1e-5, 2, 5.0


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.cat([torch.randn(30, 3, generator=g, dtype=torch.float64) + 3,
                   torch.randn(30, 3, generator=g, dtype=torch.float64) - 3])  # d = 3: R1SMG needs d > 2
    y = torch.cat([torch.zeros(30, dtype=torch.long), torch.ones(30, dtype=torch.long)])
    return X, y


def _releases() -> list[tuple[str, str, str, Callable[[], Any]]]:
    """(family, mode, mechanism, thunk returning an object with ``.privacy`` or a record)."""
    from torchdpgmm.release import release

    X, y = _data()
    g = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    out: list[tuple[str, str, str, Callable[[], Any]]] = []
    for mech in ("kl", "laplace", "gaussian", "colored", "r1smg"):
        out.append(("release", "as-published", mech,
                    lambda m=mech: release(X, y, K, EPS, DELTA, mechanism=m, mode="as-published", generator=g())))
    from torchdpgmm.release.sound import release_sound

    sig = inspect.signature(release_sound).parameters
    flavours: list[dict[str, str]] = [{}]  # the release's default noise
    if "noise" in sig or any(p.kind is p.VAR_KEYWORD for p in sig.values()):
        flavours.append({"noise": "continuous"})
    for adj in ("add-remove", "replace-one"):
        for mech in ("gaussian", "kl", "colored", "laplace"):
            for fl in flavours if mech in ("gaussian", "laplace") else flavours[:1]:
                label = f"{mech} ({adj}" + (f", {fl['noise']} noise)" if fl else ")")
                out.append(("release", "sound", label,
                            lambda m=mech, a=adj, f=fl: release_sound(X, y, K, EPS, DELTA, clip_bound=CLIP,
                                                                      adjacency=a, mechanism=m, generator=g(), **f)))
    # the estimators' and `release --bounds` default with public bounds (docs/privacy.md Section 3): the table mapped
    # into the unit box of the bounds (-8, 8) per column, then the two-stage release (a private centre, then the
    # mixture with covariance_type="auto" about it); and the one-stage release about the box's middle
    from torchdpgmm.bounds import Bounds
    from torchdpgmm.bounds import release_in_unit_box

    box = Bounds.parse((-8.0, 8.0), n_features=3)
    U = box.to_unit(X)
    for center in ("noisy-mean", "box"):
        label = f"kl, bounds -8:8 per column (unit box), center={center}, auto covariance (estimator default)"
        out.append(("release", "sound", label,
                    lambda c=center: release_in_unit_box(U, y, K, EPS, DELTA, box, center=c, generator=g(),
                                                         covariance_type="auto", adjacency="add-remove")))
    from torchdpgmm.em.dp_em import fit_dp_em
    from torchdpgmm.em.dp_msnm import fit_dp_msnm
    from torchdpgmm.em.dpgmm import fit_dpgmm

    for variant in ("LLG", "GGG"):
        out.append(("em", "-", f"dp-em {variant}",
                    lambda v=variant: fit_dp_em(X, K, EPS, DELTA, variant=v, max_iter=3, data_bound=CLIP, generator=g())))
    out.append(("em", "-", "dpgmm", lambda: fit_dpgmm(X, K, EPS, R=CLIP, max_iter=3, generator=g())))
    out.append(("em", "-", "dp-msnm", lambda: fit_dp_msnm(X, K, EPS, R=CLIP, max_iter=3, generator=g())))
    from torchdpgmm.bayes.release import xi_release

    lo, hi = torch.full((K, 3), -8.0, dtype=torch.float64), torch.full((K, 3), 8.0, dtype=torch.float64)
    out.append(("bayes", "-", "xi", lambda: xi_release(X, y, K, EPS, lo, hi, generator=g())))
    return out


def _record_row(family: str, mode: str, mechanism: str, thunk: Callable[[], Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"family": family, "call_mode": mode, "release": mechanism}
    try:
        obj = thunk()
    except Exception as exc:  # a refusal is information for the table
        row["status"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return row
    rec = getattr(obj, "privacy", obj)
    d = rec.to_dict() if hasattr(rec, "to_dict") else dict(vars(rec))
    keep = ("epsilon", "delta", "adjacency", "accountant", "mode", "mechanism", "covered", "notes", "blocks", "split")
    row.update({k: d.get(k) for k in keep})
    row["record_type"] = type(rec).__name__
    row["status"] = "ok"
    return row


def collect() -> dict[str, Any]:
    torch.set_num_threads(1)
    rows = [_record_row(*r) for r in _releases()]
    from torchdpgmm._provenance import commit as _commit

    commit = _commit() or ""  # "+dirty" when tracked files differ from the commit
    return {"study": "privacy-records", "config": {"epsilon": EPS, "delta": DELTA, "num_classes": K,
                                                   "clip_bound": CLIP, "num_records": 60},
            "rows": rows, "environment": {"torch": torch.__version__, "python": platform.python_version(),
                                          "commit": commit}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="directory for privacy_records.json")
    a = ap.parse_args()
    payload = collect()
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "privacy_records.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {path} ({len(payload['rows'])} releases)")


if __name__ == "__main__":
    main()
