"""Resumable parameter sweeps over (mechanism, epsilon, N, K, d) grids, locally or on Ray.

A sweep is cut into *chunks*: one data configuration ``(N, K, d)`` and a slice of its trials, covering
**every mechanism and every epsilon** on the same datasets. A chunk generates its data once, fits it once,
and calls :func:`torchdpgmm.release.release` once per mechanism with the epsilon grid as a leading batch
dimension, so the data-only parts (the fit of eq. (2) and the covering SDP behind eq. (23) of Liu, Scaglione
& Peisert 2025, and the colored baseline's SDP of Ravi et al.) are solved once per dataset, not once per
epsilon. Each chunk writes its rows to ``OUT/chunks/<id>.csv`` atomically, so a killed sweep resumes by
skipping the chunks already on disk.

Per-trial reproducibility. Trials are grouped in fixed *blocks* of ``block_size`` trials (a spec field,
default 40). Block ``b`` of a configuration draws its data from a generator seeded by
``(seed, N, K, d, b)`` and the noise of mechanism ``m`` from one seeded by ``(seed, m, N, K, d, b)``; a
block always draws ``block_size`` datasets (surplus trials past ``trials`` are discarded). A trial's row
therefore depends only on ``(seed, N, K, d, mechanism, trial index)`` and the epsilon grid, never on the
chunk size, the memory budget, the backend or the number of workers; chunk sizes must be multiples of
the block size. Within a block the epsilon grid is one batch dimension of a single noise draw, so adding an
epsilon to the grid changes the other epsilons' noise draws (not their law); the data never change. All
mechanisms see the same datasets (common random numbers), so mechanism comparisons are paired.

Devices. The generators live on ``spec.device``; CPU and CUDA generators produce different streams, so rows
are bit-identical across runs on the same device type (and torch version) but equal only in
distribution between CPU and CUDA (see ``tests/test_device_contract.py``).

Memory. A chunk holds ``chunk_size`` trials in memory; with ``chunk_size=None`` the chunk size is the
largest multiple of ``block_size`` whose estimated working set fits ``memory_budget`` bytes. The plan is
streamed (:func:`iter_chunks`; on Ray a bounded window of tasks is in flight) and summaries are computed by
streaming over the chunk files with :class:`~torchdpgmm.montecarlo.RunningStats` (exact running
mean/variance, quantiles from a fixed log-grid histogram), so memory does not depend on the number of
trials (``benchmarks/bench_sweep_memory.py``). Locally, chunks run single-threaded by default (:func:`torch_threads`),
in ``workers`` processes when asked (:func:`run_sweep`). A sweep whose rows cannot fit on the output's disk is
refused before any work (:func:`check_disk`). With ``backend="ray"`` and an address, the address must
accept a TCP connection within :data:`RAY_CONNECT_TIMEOUT` seconds.

Files: ``OUT/sweep.json`` (the spec, checked on resume), ``OUT/chunks/*.csv``, and after completion
``OUT/results.csv`` (one row per trial), ``OUT/summary.json`` (mean, 95% CI and quantiles per grid point)
and ``OUT/sweep.png``.
"""
from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

__all__ = ["SweepSpec", "Chunk", "plan_chunks", "iter_chunks", "num_chunks", "check_disk", "run_sweep", "load_results", "iter_results", "summarize",
           "plot_results", "block_seed", "torch_threads"]

RESULT_FIELDS = ["mechanism", "epsilon", "N", "K", "d", "seed", "trial", "kl"]
MODES = ("as-published", "sound")


@dataclass
class SweepSpec:
    """A sweep grid. ``chunk_size`` (trials per chunk file / task; rounded up to a multiple of ``block_size``)
    or, when None, ``memory_budget`` (bytes, default 1 GiB) sets the chunking. ``mode="sound"`` needs ``clip_bound`` (the public L2 bound on records) and uses
    ``adjacency`` (default "replace-one"); ``classes`` is the public number of classes given to the
    release (default: each grid point's K; must be >= every K)."""

    mechanisms: list[str]
    epsilons: list[float]
    Ns: list[int] = field(default_factory=lambda: [1000])
    Ks: list[int] = field(default_factory=lambda: [5])
    ds: list[int] = field(default_factory=lambda: [3])
    trials: int = 100
    chunk_size: int | None = 40
    seed: int = 0
    delta: float = 1e-5
    variant: str = "as-published"
    mode: str = "as-published"
    device: str = "cpu"
    block_size: int = 40
    memory_budget: float | None = None
    clip_bound: float | None = None
    adjacency: str | None = None
    classes: int | None = None

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
        if self.trials < 1 or self.block_size < 1:
            raise ValueError("trials and block_size must be >= 1")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        if self.memory_budget is not None and not self.memory_budget > 0:
            raise ValueError(f"memory_budget must be > 0 bytes, got {self.memory_budget}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "sound":
            if self.clip_bound is None or not self.clip_bound > 0:
                raise ValueError("mode='sound' needs clip_bound > 0 (the public L2 bound on every record)")
        elif self.clip_bound is not None or self.adjacency is not None:
            raise ValueError("clip_bound and adjacency apply to mode='sound' only")
        if self.classes is not None and (int(self.classes) != self.classes or self.classes < max(self.Ks)):
            raise ValueError(f"classes must be an integer >= every K (max K = {max(self.Ks)}), got {self.classes}")
        if self.classes is not None and self.mode != "sound" and any(k != self.classes for k in self.Ks):
            raise ValueError("classes larger than K leave empty classes, which mode='as-published' cannot release "
                             "(it needs d + 1 points per class); use mode='sound' or classes = K")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Chunk:
    """Trials ``[first_trial, first_trial + num_trials)`` of one data configuration, every mechanism and
    epsilon; they are the blocks ``first_block ..`` of ``block_size`` trials each."""

    N: int
    K: int
    d: int
    index: int          # chunk index within the configuration
    first_trial: int
    num_trials: int
    block_size: int

    @property
    def id(self) -> str:
        return f"N{self.N}_K{self.K}_d{self.d}_t{self.first_trial:08d}"

    @property
    def blocks(self) -> range:
        b0 = self.first_trial // self.block_size
        return range(b0, b0 + -(-self.num_trials // self.block_size))


def block_seed(*parts: Any) -> int:
    """A 62-bit seed from the content ``parts`` (JSON-encoded; stable across runs, machines and backends)."""
    key = json.dumps(parts, sort_keys=True).encode()
    return int(np.random.SeedSequence([zlib.crc32(key), len(key)]).generate_state(1, np.uint64)[0] % (2**62))


def _bytes_per_trial(spec: SweepSpec, N: int, K: int, d: int) -> float:
    # the label-flip differences (K, N, d) and the fit's (K, N, d) temporaries per dataset, and the
    # (E, K, d, d) released parameters per mechanism; x16 headroom for solver temporaries
    return 8.0 * 16 * (2 * K * N * d + len(spec.epsilons) * len(spec.mechanisms) * K * (d * d + d + 2))


def chunk_size_for(spec: SweepSpec, N: int, K: int, d: int) -> int:
    """The spec's chunk size, or the largest multiple of ``block_size`` fitting the memory budget."""
    if spec.chunk_size is not None:  # rounded up to whole blocks (the unit of all computation)
        return -(-int(spec.chunk_size) // spec.block_size) * spec.block_size
    from torchdpgmm.montecarlo import DEFAULT_MEMORY_BUDGET

    budget = spec.memory_budget or DEFAULT_MEMORY_BUDGET
    blocks = max(1, int(budget // (_bytes_per_trial(spec, N, K, d) * spec.block_size)))
    return blocks * spec.block_size


def iter_chunks(spec: SweepSpec) -> Iterator[Chunk]:
    """Every chunk of the sweep, in a deterministic order, generated lazily: the plan of a sweep of
    10^12 trials costs no memory (a list of its chunks would grow without bound before any work)."""
    spec.validate()
    for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds):
        cs = chunk_size_for(spec, N, K, d)
        for c, first in enumerate(range(0, spec.trials, cs)):
            yield Chunk(int(N), int(K), int(d), c, first, min(cs, spec.trials - first), spec.block_size)


def num_chunks(spec: SweepSpec) -> int:
    """How many chunks :func:`iter_chunks` yields (arithmetic, no plan in memory)."""
    spec.validate()
    return sum(-(-spec.trials // chunk_size_for(spec, N, K, d))
               for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds))


def plan_chunks(spec: SweepSpec) -> list[Chunk]:
    """Every chunk of the sweep as a list (small sweeps; :func:`iter_chunks` streams them)."""
    return list(iter_chunks(spec))


#: a lower bound on the bytes of one CSV row (``kl,1,40,2,2,0,0,0.1`` and a line end): the disk check
#: below refuses only sweeps whose rows certainly do not fit
MIN_ROW_BYTES = 20


def result_rows(spec: SweepSpec) -> int:
    """Rows the finished sweep writes (one per mechanism, epsilon, (N, K, d) and trial)."""
    return spec.trials * len(spec.mechanisms) * len(spec.epsilons) * len(spec.Ns) * len(spec.Ks) * len(spec.ds)


def check_disk(spec: SweepSpec, out: str | Path) -> None:
    """Refuse (one-line ValueError) a sweep whose rows cannot fit on the disk of ``out``: they are written
    twice (the chunk files and ``results.csv``), at least :data:`MIN_ROW_BYTES` bytes each."""
    import shutil

    need = 2 * MIN_ROW_BYTES * result_rows(spec)
    p = Path(out).resolve()
    while not p.exists():
        p = p.parent
    free = shutil.disk_usage(p).free
    if need > free:
        raise ValueError(f"this sweep writes {result_rows(spec):.3g} rows (at least {need / 1e9:.3g} GB) but "
                         f"{p} has {free / 1e9:.3g} GB free; use fewer trials or grid points")


def _kl_rows(spec: SweepSpec, mech: str, kl, chunk: Chunk, first: int, n: int) -> list[dict[str, Any]]:
    vals = kl.detach().cpu().tolist()  # (E, T): the one host transfer per block and mechanism
    return [{"mechanism": mech, "epsilon": float(e), "N": chunk.N, "K": chunk.K, "d": chunk.d, "seed": spec.seed,
             "trial": first + i, "kl": vals[j][i]}
            for j, e in enumerate(spec.epsilons) for i in range(n)]


def _release_kl(spec: SweepSpec, mech: str, X, y, num_classes: int, eps, gen, data_classes: int | None = None):
    """Realised KL(released || fitted) (Appendix B), shape (E, T), for one mechanism over the epsilon grid;
    ``data_classes`` (the generated K, public) when it is smaller than ``num_classes`` (see :func:`_kl_of`)."""
    import torch

    from torchdpgmm.release import release

    if spec.mode == "sound":  # scalar epsilon per call; public facts from the spec only
        kw = {"clip_bound": spec.clip_bound, "adjacency": spec.adjacency or "replace-one"}
        return torch.stack([_kl_of(release(X, y, num_classes, float(e), spec.delta, mechanism=mech, mode="sound",
                                           generator=gen, **kw), X, y, num_classes, data_classes)
                            for e in spec.epsilons])
    kw = {"variant": spec.variant} if mech == "kl" else {}
    return _kl_of(release(X, y, num_classes, eps, spec.delta, mechanism=mech, mode="as-published", generator=gen, **kw), X, y, num_classes)


def _kl_of(rel, X, y, num_classes, data_classes=None):
    """``rel.kl`` when the release carries it, else KL(model || eq. (2) fit) computed here (evaluation only).

    When the public class count exceeds the generated one (``data_classes`` K < ``num_classes``: the
    classes K.. are empty, so their eq. (2) fit is undefined), the metric is the KL of the released model
    conditioned on ``y < K`` (its weights renormalised over the first K classes) to the fit of those K
    classes; the mass the release puts on the empty classes is not part of it."""
    kl = getattr(rel, "kl", None)
    if kl is not None:
        return kl
    from torchdpgmm.kl import kl_divergence
    from torchdpgmm.mixture import LabeledGMM, fit_labeled

    K = int(data_classes or num_classes)
    model = rel.model
    if K < num_classes:
        w = model.weights[..., :K]
        model = LabeledGMM(w / w.sum(-1, keepdim=True), model.means[..., :K, :], model.covariances[..., :K, :, :],
                           validate_args=False)
    return kl_divergence(model, fit_labeled(X, y, K))


def default_trial_fn(spec: SweepSpec, chunk: Chunk) -> list[dict[str, Any]]:
    """Generate the chunk's synthetic datasets (Sec. V-A of Liu, Scaglione & Peisert 2025) block by block,
    release each with every mechanism over the epsilon grid, and return one row per (mechanism, epsilon,
    trial)."""
    import torch

    from torchdpgmm.montecarlo import synthetic_data

    device = torch.device(spec.device)
    num_classes = int(spec.classes or chunk.K)
    rows: list[dict[str, Any]] = []
    for b in chunk.blocks:
        first = b * chunk.block_size
        n = min(chunk.block_size, spec.trials - first)
        g_data = torch.Generator(device=device).manual_seed(block_seed(spec.seed, "data", chunk.N, chunk.K, chunk.d, b))
        data = synthetic_data(chunk.block_size, chunk.N, chunk.K, chunk.d, generator=g_data, device=device)
        X, y = data.X, data.y    # always a whole block (the surplus trials past spec.trials are dropped)
        eps = torch.tensor(spec.epsilons, dtype=X.dtype, device=device)[:, None]
        for mech in spec.mechanisms:
            g = torch.Generator(device=device).manual_seed(
                block_seed(spec.seed, "noise", mech, chunk.N, chunk.K, chunk.d, b))
            kl = _release_kl(spec, mech, X, y, num_classes, eps, g, data_classes=chunk.K)[:, :n]
            rows += _kl_rows(spec, mech, kl, chunk, first, n)
    return rows


def _atomic_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".csv")
    os.fchmod(fd, 0o644)  # mkstemp creates 0600; results are meant to be shared
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
              trial_fn: Callable[[SweepSpec, Chunk], list[dict[str, Any]]] | None = None,
              workers: int = 1, threads: int | None = 1) -> dict[str, Any]:
    """Run (or resume) a sweep; returns ``{"done": n, "skipped": n, "results": path}``.

    ``backend="local"`` runs the chunks with ``threads`` torch intra-op threads each (default 1, see
    :func:`torch_threads`; None leaves torch's setting), in this process (``workers=1``) or in ``workers``
    spawned worker processes (at most ``2 * workers`` chunks in flight; each worker holds one chunk, so the
    working set is about ``workers`` times the chunk's); the rows do not depend on ``workers``."""
    out = Path(out)
    spec.validate()
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    for name, v in (("workers", workers), ("threads", 1 if threads is None else threads)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if backend == "ray" and workers != 1:
        raise ValueError("workers applies to backend='local' (Ray schedules its own workers)")
    check_disk(spec, out)
    if backend == "ray":
        _check_ray_address(ray_address)
    _prepare(out, spec, resume)
    chunk_dir = out / "chunks"
    total = num_chunks(spec)
    fn = trial_fn or default_trial_fn
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="sweep chunks", unit="chunk")

    def pending_chunks() -> Iterator[Chunk]:
        # streamed: the chunks still to run are found lazily, so memory does not depend on the number of trials
        for c in iter_chunks(spec):
            if not (chunk_dir / f"{c.id}.csv").exists():
                yield c
            elif bar is not None:
                bar.update(1)

    todo = pending_chunks()
    done = 0
    if backend == "local":
        done = _run_local(spec, todo, chunk_dir, fn, workers, threads, bar)
    else:
        done = _run_ray(spec, todo, out, fn, ray_address, bar)
    if bar is not None:
        bar.close()
    results = out / "results.csv"
    _concat_chunks(results, (chunk_dir / f"{c.id}.csv" for c in iter_chunks(spec)))
    summary = summarize(iter_results(out, iter_chunks(spec)))
    (out / "summary.json").write_text(json.dumps({"spec": spec.to_dict(), "points": summary}, indent=2))
    plot_results(summary, out / "sweep.png", spec=spec)
    return {"done": done, "skipped": total - done, "results": str(results), "summary": summary}


@contextlib.contextmanager
def torch_threads(n: int | None = 1) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (restored after; None changes nothing).

    One is the sweep's default: a chunk is a long sequence of small batched operations (3 x 3 and 6 x 6
    factorisations, (T, K, 24) element-wise steps of the covering-SDP solver); intra-op threads cannot split
    them usefully, and on a loaded machine their OpenMP barriers wait for descheduled threads (the KL sweep
    with 2 threads against 1 on the same code and load: ``speed_before_after`` in
    ``benchmarks/results/bench_sweep_memory.json``). Parallelism comes from ``workers`` (one chunk per
    process) instead."""
    import torch

    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _worker_chunk(fn: Callable, spec: SweepSpec, chunk: Chunk, threads: int | None) -> list[dict[str, Any]]:
    with torch_threads(threads):
        return fn(spec, chunk)


def _run_local(spec: SweepSpec, todo: Iterable[Chunk], chunk_dir: Path, fn: Callable, workers: int,
               threads: int | None, bar: Any) -> int:
    """Run the pending chunks here (``workers=1``) or in ``workers`` spawned processes, at most
    ``2 * workers`` chunks in flight (memory does not grow with the number of chunks); each chunk's rows
    are written by this process, atomically, as it finishes."""
    done = 0
    if workers == 1:
        for c in todo:
            _atomic_rows(chunk_dir / f"{c.id}.csv", _worker_chunk(fn, spec, c, threads))
            done += 1
            if bar is not None:
                bar.update(1)
        return done
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    todo = iter(todo)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: dict[Any, Chunk] = {}
        while True:
            for c in itertools.islice(todo, 2 * workers - len(pending)):
                pending[pool.submit(_worker_chunk, fn, spec, c, threads)] = c
            if not pending:
                break
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                c = pending.pop(fut)
                _atomic_rows(chunk_dir / f"{c.id}.csv", fut.result())
                done += 1
                if bar is not None:
                    bar.update(1)
    return done


def _concat_chunks(path: Path, parts: Iterable[Path]) -> None:
    """``results.csv``: the chunk files in plan order, one header, streamed (memory of one line), atomic."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".csv")
    os.fchmod(fd, 0o644)  # mkstemp creates 0600; results are meant to be shared
    with os.fdopen(fd, "w", newline="") as fh:
        fh.write(",".join(RESULT_FIELDS) + "\r\n")
        for p in parts:
            with open(p, newline="") as src:
                next(src, None)
                for line in src:
                    fh.write(line)
    os.replace(tmp, path)


#: seconds a ``--ray-address`` may take to accept a TCP connection before the sweep gives up
RAY_CONNECT_TIMEOUT = 15.0


def _check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Fail fast (one-line ValueError) when ``host:port`` / ``ray://host:port`` accepts no TCP connection
    within ``timeout`` seconds; ``ray.init`` itself retries a wrong address for minutes and takes no
    timeout (ray-project/ray issue 46863: the maintainers declined one and suggest a check on the caller's
    side). ``None``, ``"auto"`` and ``"local"`` are left to Ray."""
    import socket

    if address is None or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--ray-address must be host:port or ray://host:port, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"cannot reach the Ray cluster at {address} within {timeout:g} s "
                         f"({e.strerror or type(e).__name__}); is it running?") from None


def _run_ray(spec: SweepSpec, todo: Iterable[Chunk], out: Path, fn: Callable, address: str | None,
             bar: Any) -> int:
    try:
        import ray
    except ImportError:
        raise ValueError("the ray backend needs Ray: pip install 'torchdpgmm[ray]'") from None
    started_here = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        started_here = True
    done = 0
    try:
        num_gpus = 1 if spec.device.startswith("cuda") else 0
        remote = ray.remote(num_gpus=num_gpus, num_cpus=1)(fn)
        # a bounded window of tasks in flight: memory does not grow with the number of chunks
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        todo = iter(todo)
        pending = {}
        while True:
            for c in itertools.islice(todo, window - len(pending)):
                pending[remote.remote(spec, c)] = c
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                c = pending.pop(ref)
                _atomic_rows(out / "chunks" / f"{c.id}.csv", ray.get(ref))
                done += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if started_here:
            ray.shutdown()
    return done


def iter_results(out: str | Path, chunks: Iterable[Chunk] | None = None) -> Iterator[dict[str, Any]]:
    """Stream the rows of every finished chunk (in plan order when ``chunks`` is given), with typed values."""
    out = Path(out)
    paths = ([out / "chunks" / f"{c.id}.csv" for c in chunks] if chunks is not None
             else sorted((out / "chunks").glob("*.csv")))
    for p in paths:
        if not p.exists():
            continue
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                yield {"mechanism": r["mechanism"], "epsilon": float(r["epsilon"]), "N": int(r["N"]),
                       "K": int(r["K"]), "d": int(r["d"]), "seed": int(r["seed"]), "trial": int(r["trial"]),
                       "kl": float(r["kl"])}


def load_results(out: str | Path, chunks: Iterable[Chunk] | None = None) -> list[dict[str, Any]]:
    """All rows in memory (small sweeps; use :func:`iter_results` to stream large ones)."""
    return list(iter_results(out, chunks))


def summarize(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per grid point: mean, Student-t 95% CI, median / 5% / 95% quantiles, streaming over ``rows``.

    Exact running mean and variance (Chan et al.'s pairwise update); quantiles from a fixed log-grid
    histogram (:class:`~torchdpgmm.montecarlo.RunningStats`, relative resolution 1.2%), so memory does not
    grow with the number of trials."""
    from torchdpgmm.montecarlo import RunningStats

    groups: dict[tuple, Any] = {}
    buf: dict[tuple, list[float]] = {}
    for i, r in enumerate(rows, 1):
        key = (r["mechanism"], r["epsilon"], r["N"], r["K"], r["d"])
        if key not in groups:
            groups[key], buf[key] = RunningStats(), []
        buf[key].append(r["kl"])
        if i % 65536 == 0:  # flush: memory stays bounded whatever the number of rows
            for k, v in buf.items():
                groups[k].update(v)
                v.clear()
    for k, v in buf.items():
        groups[k].update(v)
    out = []
    for (m, e, N, K, d), st in groups.items():
        s = st.summary()
        out.append({"mechanism": m, "epsilon": e, "N": N, "K": K, "d": d, "mean": s["mean"],
                    "ci_low": s["ci_low"], "ci_high": s["ci_high"], "median": s["median"], "q05": s["q05"],
                    "q95": s["q95"], "nonfinite": s["nonfinite"], "trials": s["n"]})
    return out


def plot_results(summary: list[dict[str, Any]], path: str | Path, *, spec: SweepSpec | None = None) -> None:
    """KL vs epsilon per mechanism (and per (N, K, d) when several), mean and 95% CI on log axes, with the
    sweep's settings (from ``spec`` when given) in the caption; see :mod:`torchdpgmm.experiments.plotting`."""
    from torchdpgmm.experiments.plotting import plot_curves, series_from_rows

    varying = [c for c in ("N", "K", "d") if len({s[c] for s in summary}) > 1]
    variant = spec.variant if spec is not None and spec.mode == "as-published" else None
    rows = [dict(s, label=(f"kl/{variant}" if s["mechanism"] == "kl" and variant else s["mechanism"])
                 + "".join(f" {c}={s[c]}" for c in varying)) for s in summary]
    rows.sort(key=lambda r: (r["label"], r["epsilon"]))
    settings: dict[str, Any] = {c: summary[0][c] for c in ("N", "K", "d") if c not in varying and summary}
    settings["trials"] = max((int(s["trials"]) for s in summary), default=0)
    if spec is not None:
        settings.update(delta=spec.delta, mode=spec.mode, classes=spec.classes)
        if spec.mode == "sound":
            settings.update(adjacency=spec.adjacency or "replace-one", clip_bound=spec.clip_bound)
        else:
            settings.update(adjacency="label-flip")
    plot_curves(series_from_rows(rows, "epsilon"), path, x_label="epsilon", y_label="KL(released || fitted)",
                title="Sweep: KL vs epsilon", settings=settings, logx=True, logy=True)
