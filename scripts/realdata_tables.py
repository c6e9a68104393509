"""Markdown tables of the real-data studies, read from their JSON outputs (used for docs/realdata.md).

    python scripts/realdata_tables.py DIR [--public DIR2]

DIR holds iris.json, mnist.json, mnist-mlp.json and record-level.json as written by
``torchdpgmm experiment ... --out DIR``; ``--public`` a folder with the ``--pca-fit public`` mnist.json.
Every number printed comes from those files.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def iris_table(d) -> str:
    rows = [r for r in d["rows"] if r.get("kind") == "kl"]
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    eps = sorted({r["epsilon"] for r in rows})
    out = ["| mechanism | " + " | ".join(f"eps={e:g}" for e in eps) + " |", "|---|" + "---|" * len(eps)]
    for m in mechs:
        v = {r["epsilon"]: r["kl"] for r in rows if r["mechanism"] == m}
        out.append(f"| {m} | " + " | ".join(f"{v[e]:.4g}" for e in eps) + " |")
    return "\n".join(out) + f"\n\n(run time {d['runtime_seconds']:.0f} s)"


def mnist_table(d) -> str:
    rows = [r for r in d["rows"] if r["epsilon"] is not None]
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    eps = sorted({r["epsilon"] for r in rows})
    base = [r for r in d["rows"] if r["mechanism"] == "non-private"][0]["gmm_accuracy"]
    out = ["| mechanism | " + " | ".join(f"eps={e:g}" for e in eps) + " |", "|---|" + "---|" * len(eps)]
    for m in mechs:
        v = {r["epsilon"]: r for r in rows if r["mechanism"] == m}
        out.append(f"| {m} | " + " | ".join(f"{v[e]['kl']:.3g} / {v[e]['gmm_accuracy']:.3f}" for e in eps) + " |")
    return "\n".join(out) + f"\n\nnon-private Gaussian classifier: {base:.3f} (run time {d['runtime_seconds']:.0f} s)"


def _final(rows, kind, variant, mech, eps):
    rr = [r for r in rows if r.get("kind") == kind and r.get("variant") == variant and r.get("mechanism") == mech
          and r.get("epsilon") == eps]
    if not rr:
        return None
    top = max(r["iteration"] for r in rr)
    return max((r for r in rr if r["iteration"] == top), key=lambda r: r["accuracy"])


def mlp_table(d) -> str:
    rows = d["rows"]
    eps = d["config"]["epsilons"]
    mechs = d["config"]["mechanisms"]
    head = ["epsilon"] + [f"GMM clf {m}" for m in mechs] + [f"MLP long {m}" for m in mechs] + [f"MLP paper {m}" for m in mechs]
    head.append("DP-SGD tuned")
    out = ["| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]

    def f(r, key="accuracy"):
        return "-" if r is None else f"{r[key]:.3f}"

    for e in eps:
        g = [[r for r in rows if r.get("kind") == "gmm-classifier" and r["mechanism"] == m and r["epsilon"] == e] for m in mechs]
        cells = [f"{e:g}"] + [f(x[0], "gmm_accuracy") if x else "-" for x in g]
        cells += [f(_final(rows, "mlp", "long", m, e)) for m in mechs]
        cells += [f(_final(rows, "mlp", "paper", m, e)) for m in mechs]
        cells.append(f(_final(rows, "dpsgd", "tuned", "dp-sgd", e)))
        out.append("| " + " | ".join(cells) + " |")
    refs = []
    for m in ("real-data", "non-private-gmm"):
        for v in ("paper", "long"):
            r = _final(rows, "mlp", v, m, None)
            if r:
                refs.append(f"MLP {v} on {m}: {r['accuracy']:.3f} (lr {r['lr']:g})")
    secs = d["config"].get("mlp_seconds", {})
    return ("\n".join(out) + "\n\nReferences: " + "; ".join(refs) +
            f". Run time {d['runtime_seconds']:.0f} s (MLP batches: " + ", ".join(f"{k} {v:.0f} s" for k, v in secs.items()) + ")")


def record_table(d) -> str:
    rows = d["rows"]
    out = ["| B | clipped fraction | as published vs clipped fit | as published vs raw fit | sound vs clipped fit | sound vs raw fit |",
           "|---|---|---|---|---|---|"]

    def f(r, k):
        return "-" if r is None else f"{r[k]:.3g} ({r[k + '_median']:.3g})"

    for b in sorted({r["clip_bound"] for r in rows}):
        a = [r for r in rows if r["clip_bound"] == b and r["mechanism"].startswith("kl-record")][0]
        s = next((r for r in rows if r["clip_bound"] == b and r["mechanism"].startswith("kl-sound")), None)
        out.append(f"| {b:g} | {a['clipped_fraction']:.3f} | {f(a, 'kl')} | {f(a, 'kl_vs_unclipped')} | "
                   f"{f(s, 'kl')} | {f(s, 'kl_vs_unclipped')} |")
    return "\n".join(out) + f"\n\nKL mean (median) over trials; run time {d['runtime_seconds']:.0f} s"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--public", type=Path, default=None)
    a = p.parse_args(argv)
    for name, fn in (("iris", iris_table), ("mnist", mnist_table), ("mnist-mlp", mlp_table), ("record-level", record_table)):
        d = _load(a.dir / f"{name}.json")
        if d is not None:
            print(f"### {name}\n\n{fn(d)}\n")
    if a.public is not None:
        d = _load(a.public / "mnist.json")
        if d is not None:
            print(f"### mnist, PCA on a public split\n\n{mnist_table(d)}\n")


if __name__ == "__main__":
    main()
