"""Resumable parameter sweeps over (mechanism, epsilon, N, K, d, seed) grids, locally or on Ray.

A sweep is cut into *chunks*: one grid point and a slice of its trials. Each chunk is one batched call
(all its trials at once) and writes its rows to ``OUT/chunks/<id>.csv`` atomically, so a killed sweep
resumes by skipping the chunks already on disk; nothing finished is recomputed or lost.

Seeds are derived from the sweep seed and the chunk's *content* (grid values and chunk index), never
from execution order, so the local and Ray backends give identical numbers, and re-running a subset
gives the same rows. The synthetic datasets depend only on (seed, N, K, d, chunk): every mechanism and
epsilon sees the same data (common random numbers), which makes mechanism comparisons paired.

Files: ``OUT/sweep.json`` (the spec, checked on resume), ``OUT/chunks/*.csv``, and after completion
``OUT/results.csv`` (one row per trial), ``OUT/summary.json`` (mean and 95% CI per grid point) and
``OUT/sweep.png``.
"""
from __future__ import annotations

import csv
import itertools
import json
import os
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["SweepSpec", "Chunk", "plan_chunks", "run_sweep", "load_results", "summarize", "plot_results"]

RESULT_FIELDS = ["mechanism", "epsilon", "N", "K", "d", "seed", "chunk", "trial", "kl"]


@dataclass
class SweepSpec:
    mechanisms: list[str]
    epsilons: list[float]
    Ns: list[int] = field(default_factory=lambda: [1000])
    Ks: list[int] = field(default_factory=lambda: [5])
    ds: list[int] = field(default_factory=lambda: [3])
    trials: int = 100
    chunk_size: int = 50
    seed: int = 0
    delta: float = 1e-5
    variant: str = "as-published"
    mode: str = "as-published"
    device: str = "cpu"

    def validate(self) -> None:
        if not self.mechanisms:
            raise ValueError("give at least one mechanism")
        if not self.epsilons or any(not (e > 0) for e in self.epsilons):
            raise ValueError("epsilons must be > 0")
        if not (0 < self.delta < 1):
            raise ValueError("delta must lie in (0, 1)")
        for name, vals, lo in (("N", self.Ns, 4), ("K", self.Ks, 2), ("d", self.ds, 1)):
            if not vals or any(int(v) != v or v < lo for v in vals):
                raise ValueError(f"{name} values must be integers >= {lo}")
        if self.trials < 1 or self.chunk_size < 1:
            raise ValueError("trials and chunk_size must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Chunk:
    mechanism: str
    epsilon: float
    N: int
    K: int
    d: int
    index: int          # chunk index within the grid point
    first_trial: int
    num_trials: int
    data_seed: int
    noise_seed: int

    @property
    def id(self) -> str:
        return f"{self.mechanism}_e{self.epsilon:g}_N{self.N}_K{self.K}_d{self.d}_c{self.index:04d}"


def _seed(*parts: Any) -> int:
    key = json.dumps(parts, sort_keys=True).encode()
    return int(np.random.SeedSequence([zlib.crc32(key), len(key)]).generate_state(1, np.uint64)[0] % (2**62))


def plan_chunks(spec: SweepSpec) -> list[Chunk]:
    """Every chunk of the sweep, in a deterministic order."""
    spec.validate()
    chunks = []
    n_chunks = -(-spec.trials // spec.chunk_size)
    for mech, eps, N, K, d in itertools.product(spec.mechanisms, spec.epsilons, spec.Ns, spec.Ks, spec.ds):
        for c in range(n_chunks):
            first = c * spec.chunk_size
            n = min(spec.chunk_size, spec.trials - first)
            chunks.append(Chunk(mech, float(eps), int(N), int(K), int(d), c, first, n,
                                _seed(spec.seed, "data", N, K, d, c),
                                _seed(spec.seed, "noise", mech, float(eps), N, K, d, c)))
    return chunks


def default_trial_fn(spec: SweepSpec, chunk: Chunk) -> list[dict[str, Any]]:
    """Generate ``chunk.num_trials`` synthetic datasets (Sec. V-A), release each, return one row per trial."""
    import torch

    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    device = torch.device(spec.device)
    g_data = torch.Generator(device=device).manual_seed(chunk.data_seed)
    g_noise = torch.Generator(device=device).manual_seed(chunk.noise_seed)
    data = synthetic_data(chunk.num_trials, chunk.N, chunk.K, chunk.d, generator=g_data, device=device)
    X, y = data.X, data.y
    kw: dict[str, Any] = {"mode": spec.mode}
    if chunk.mechanism == "kl":
        kw["variant"] = spec.variant
    rel = release(X, y, chunk.K, chunk.epsilon, spec.delta, mechanism=chunk.mechanism, generator=g_noise, **kw)
    kl = rel.kl.detach().cpu().tolist()
    return [
        {"mechanism": chunk.mechanism, "epsilon": chunk.epsilon, "N": chunk.N, "K": chunk.K, "d": chunk.d,
         "seed": spec.seed, "chunk": chunk.index, "trial": chunk.first_trial + i, "kl": v}
        for i, v in enumerate(kl)
    ]


def _atomic_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".csv")
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=RESULT_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in RESULT_FIELDS})
    os.replace(tmp, path)


def _prepare(out: Path, spec: SweepSpec, resume: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chunks").mkdir(exist_ok=True)
    manifest = out / "sweep.json"
    if manifest.exists():
        old = json.loads(manifest.read_text())
        if old != spec.to_dict():
            raise ValueError(f"{out} holds a different sweep (see {manifest}); use another --out or delete it")
        if not resume:
            raise ValueError(f"{out} already holds this sweep; pass --resume to continue it")
    else:
        manifest.write_text(json.dumps(spec.to_dict(), indent=2))


def run_sweep(spec: SweepSpec, out: str | Path, backend: str = "local", resume: bool = False,
              ray_address: str | None = None, progress: bool = True,
              trial_fn: Callable[[SweepSpec, Chunk], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Run (or resume) a sweep; returns ``{"done": n, "skipped": n, "results": path}``."""
    out = Path(out)
    spec.validate()
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    _prepare(out, spec, resume)
    chunks = plan_chunks(spec)
    todo = [c for c in chunks if not (out / "chunks" / f"{c.id}.csv").exists()]
    skipped = len(chunks) - len(todo)
    fn = trial_fn or default_trial_fn
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(chunks), initial=skipped, desc="sweep chunks", unit="chunk")
    if backend == "local":
        for c in todo:
            _atomic_rows(out / "chunks" / f"{c.id}.csv", fn(spec, c))
            if bar is not None:
                bar.update(1)
    else:
        _run_ray(spec, todo, out, fn, ray_address, bar)
    if bar is not None:
        bar.close()
    rows = load_results(out, chunks)
    results = out / "results.csv"
    _atomic_rows(results, rows)
    summary = summarize(rows)
    (out / "summary.json").write_text(json.dumps({"spec": spec.to_dict(), "points": summary}, indent=2))
    plot_results(summary, out / "sweep.png")
    return {"done": len(todo), "skipped": skipped, "results": str(results), "summary": summary}


def _run_ray(spec: SweepSpec, todo: list[Chunk], out: Path, fn: Callable, address: str | None, bar: Any) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError("the ray backend needs Ray: pip install 'torchdpgmm[ray]'") from None
    started_here = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        started_here = True
    try:
        num_gpus = 1 if spec.device.startswith("cuda") else 0
        remote = ray.remote(num_gpus=num_gpus, num_cpus=1)(fn)
        pending = {remote.remote(spec, c): c for c in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                c = pending.pop(ref)
                _atomic_rows(out / "chunks" / f"{c.id}.csv", ray.get(ref))
                if bar is not None:
                    bar.update(1)
    finally:
        if started_here:
            ray.shutdown()


def load_results(out: str | Path, chunks: Iterable[Chunk] | None = None) -> list[dict[str, Any]]:
    """Rows of every finished chunk (in plan order when ``chunks`` is given), with typed values."""
    out = Path(out)
    paths = ([out / "chunks" / f"{c.id}.csv" for c in chunks] if chunks is not None
             else sorted((out / "chunks").glob("*.csv")))
    rows = []
    for p in paths:
        if not p.exists():
            continue
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append({"mechanism": r["mechanism"], "epsilon": float(r["epsilon"]), "N": int(r["N"]),
                             "K": int(r["K"]), "d": int(r["d"]), "seed": int(r["seed"]), "chunk": int(r["chunk"]),
                             "trial": int(r["trial"]), "kl": float(r["kl"])})
    return rows


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from scipy import stats

    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["mechanism"], r["epsilon"], r["N"], r["K"], r["d"]), []).append(r["kl"])
    out = []
    for (m, e, N, K, d), v in groups.items():
        a = np.asarray(v)
        n = len(a)
        half = float(stats.t.ppf(0.975, n - 1) * a.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        out.append({"mechanism": m, "epsilon": e, "N": N, "K": K, "d": d, "mean": float(a.mean()),
                    "ci_low": float(a.mean() - half), "ci_high": float(a.mean() + half), "trials": n})
    return out


def plot_results(summary: list[dict[str, Any]], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    keys = sorted({(s["mechanism"], s["N"], s["K"], s["d"]) for s in summary})
    for key in keys:
        pts = sorted((s for s in summary if (s["mechanism"], s["N"], s["K"], s["d"]) == key), key=lambda s: s["epsilon"])
        e = [p["epsilon"] for p in pts]
        ax.errorbar(e, [p["mean"] for p in pts],
                    yerr=[[p["mean"] - p["ci_low"] for p in pts], [p["ci_high"] - p["mean"] for p in pts]],
                    marker="o", capsize=3, label=f"{key[0]} N={key[1]} K={key[2]} d={key[3]}")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("KL(released || fitted)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
