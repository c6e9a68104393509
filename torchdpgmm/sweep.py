"""Resumable parameter sweeps over (mechanism, epsilon, N, K, d) grids, locally or on Ray.

A sweep is cut into *chunks*: one data configuration ``(N, K, d)`` and a slice of its trials, covering
**every mechanism and every epsilon** on the same datasets. A chunk generates its data once, fits it once,
and calls :func:`torchdpgmm.release.release` once per mechanism with the epsilon grid as a leading batch
dimension, so the data-only parts (the fit of eq. (2) and the covering SDP behind eq. (23) of Liu, Scaglione
& Peisert 2025, and the colored baseline's SDP of Ravi et al.) are solved once per dataset, not once per
epsilon. Each chunk writes its rows to ``OUT/chunks/<id>.csv`` atomically, so a killed sweep resumes by
skipping the chunks already on disk.

Per-trial reproducibility. Trials are grouped in *blocks* of ``block_size`` trials, the unit of one batched
release call and of seeding. Block ``b`` of a configuration draws its data from a generator seeded by
``(seed, N, K, d, b)`` and the noise of mechanism ``m`` from one seeded by ``(seed, m, N, K, d, b)``; a
block always draws ``block_size`` datasets (surplus trials past ``trials`` are discarded). A trial's row
therefore depends only on ``(seed, N, K, d, mechanism, trial index)``, the epsilon grid and the block size,
never on the chunk size, the memory budget's chunking, the backend or the number of workers; chunk sizes
are multiples of the block size. Within a block the epsilon grid is one batch dimension of a single noise
draw, so adding an epsilon to the grid changes the other epsilons' noise draws (not their law); the data
never change. All mechanisms see the same datasets (common random numbers), so mechanism comparisons are
paired.

Block size. ``block_size=None`` (the default) is chosen by :func:`auto_block_size` from a fixed public
ladder: the largest of ``cap, cap/2, cap/4, ...`` (:data:`AUTO_BLOCK_CAP`: 256 trials on CPU, 32,768 on
CUDA) whose footprint (:func:`bytes_per_trial` on CPU, measured by a probe block on CUDA:
:func:`measure_bytes_per_trial`) fits the memory there is (``memory_budget``, the device's free memory:
``torch.cuda.mem_get_info`` / the available RAM), then evened out over the trials (``ceil(trials /
ceil(trials / rung))``: no block is mostly surplus). The cap is what a block needs to amortise the
release's per-call work (CPU: a block is compute-bound well below it; CUDA: a block of 32,768 trials x E
epsilons keeps the card's kernels large, and at <= 100 KB per trial uses about 3 GB), so every machine
whose free memory holds a block at the cap picks the same block and writes the same rows. Only a device too
small for the cap picks a smaller rung, whose rows differ in value (not in law); the block sizes a sweep
ran with are recorded in ``OUT/sweep.json`` and a resume reuses them, whatever the machine. An explicit
``block_size`` overrides the rule (and is refused in one line when it cannot fit ``memory_budget``).
Out of memory: an automatic block that runs out of memory before any chunk of the sweep is on disk is
halved (down the same ladder) and the sweep restarts; any other out-of-memory is one line (ValueError,
exit 2 on the command line), finished chunks kept for ``--resume``; never a traceback.

Devices. The generators live on ``spec.device``; CPU and CUDA generators produce different streams, so rows
are bit-identical across runs on the same device type (and torch version) but equal only in
distribution between CPU and CUDA (see ``tests/test_device_contract.py``).

Memory. A chunk runs its blocks one after the other; with ``chunk_size=None`` a chunk is as many whole blocks
as fit ``memory_budget`` (default 1 GiB) up to :data:`CHUNK_TRIALS` trials, at least one block. The plan is
streamed (:func:`iter_chunks`; on Ray a bounded window of tasks is in flight) and summaries are computed by
streaming over the chunk files with :class:`~torchdpgmm.montecarlo.RunningStats` (exact running
mean/variance, quantiles from a fixed log-grid histogram), one column array per chunk, so memory does not
depend on the number of trials (``benchmarks/bench_sweep_memory.py``). Locally, chunks run single-threaded
by default (:func:`torch_threads`), in ``workers`` processes when asked (:func:`run_sweep`). A sweep whose
rows cannot fit on the output's disk is refused before any work (:func:`check_disk`). With
``backend="ray"`` and an address, the address must accept a TCP connection within
:data:`RAY_CONNECT_TIMEOUT` seconds.

Files: ``OUT/sweep.json`` (the spec and the block sizes, checked on resume), ``OUT/chunks/*.csv`` (or
``*.parquet``), ``OUT/progress.json`` (trials done, elapsed and estimated seconds left, as chunks finish), and
after completion ``OUT/results.csv`` or, with ``results_format="parquet"``,
``OUT/results.parquet`` (one row per trial; Parquet through pyarrow, an optional dependency, columnar and
compressed: pandas and polars read it), ``OUT/summary.json`` (mean, 95% CI and quantiles per grid point)
and ``OUT/sweep.png``.
"""
from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import math
import numbers
import os
import shutil
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import numpy.random  # noqa: F401  (numpy loads it lazily: a Ctrl-C inside that first import, in block_seed, was lost)

__all__ = ["SweepSpec", "Chunk", "plan_chunks", "iter_chunks", "num_chunks", "check_disk", "run_sweep", "load_results", "iter_results", "summarize",
           "plot_results", "block_seed", "torch_threads", "auto_block_size", "resolve_block_sizes", "bytes_per_trial",
           "measure_bytes_per_trial", "device_free_bytes", "AUTO_BLOCK_CAP"]

RESULT_FIELDS = ["mechanism", "epsilon", "N", "K", "d", "seed", "trial", "kl"]
MODES = ("as-published", "sound")
FORMATS = ("csv", "parquet")
#: the top rung of the automatic block-size ladder per device type (trials per block; see the module docstring)
AUTO_BLOCK_CAP = {"cpu": 256, "cuda": 32768}
#: the bottom rung: a memory that cannot hold a block of this many trials is refused in one line
MIN_AUTO_BLOCK = 8
#: with ``chunk_size=None``, chunks of small blocks are grouped up to this many trials (one chunk file each)
CHUNK_TRIALS = 256
#: the share of the device's free memory (CUDA) or available RAM (CPU, per worker) a block may use
FREE_FRACTION = {"cpu": 0.5, "cuda": 0.8}
#: the mechanisms a sweep releases (:data:`torchdpgmm.release.MECHANISMS`; r1smg in as-published mode only)
MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
ADJACENCIES = ("add-remove", "replace-one")
#: the sound mode's adjacency when ``adjacency`` is None: add-remove, as :func:`torchdpgmm.release.release` and
#: the command line (a manifest written before this default, with ``adjacency: null`` in sound mode, ran replace-one)
DEFAULT_ADJACENCY = "add-remove"
VARIANTS = ("as-published", "global", "exact-kl")


@dataclass
class SweepSpec:
    """A sweep grid. ``block_size`` (trials per batched release call and per seed; None: automatic, see
    :func:`auto_block_size`); ``chunk_size`` (trials per chunk file / task; rounded up to a multiple of the
    block size) or, when None, ``memory_budget`` (bytes, default 1 GiB on CPU; on CUDA it bounds the block
    too, default the device's free memory) sets the chunking. ``mode="sound"`` needs ``clip_bound`` (the
    public L2 bound on records) and uses ``adjacency`` (default "add-remove", as ``release()`` and the command
    line; :meth:`validate` fills it in); ``classes`` is the public number of classes given to the release
    (default: each grid point's K; must be >= every K). ``results_format`` is ``"csv"`` (default) or
    ``"parquet"`` (needs pyarrow). ``seed`` is an integer in ``[0, 2^63)``.

    :meth:`validate` refuses, in one line and before anything is written: repeated grid values (they would
    count the same trials twice), unknown mechanisms, variants, adjacencies and devices, r1smg in sound mode
    or at a d <= 2 (R1SMG needs d > 2), and a seed outside ``[0, 2^63)``."""

    mechanisms: list[str]
    epsilons: list[float]
    Ns: list[int] = field(default_factory=lambda: [1000])
    Ks: list[int] = field(default_factory=lambda: [5])
    ds: list[int] = field(default_factory=lambda: [3])
    trials: int = 100
    chunk_size: int | None = None
    seed: int = 0
    delta: float = 1e-5
    variant: str = "as-published"
    mode: str = "as-published"
    device: str = "cpu"
    block_size: int | None = None
    memory_budget: float | None = None
    clip_bound: float | None = None
    adjacency: str | None = None
    classes: int | None = None
    results_format: str = "csv"

    def validate(self, *, device_present: bool = True) -> None:
        """Refuse bad settings in one line; ``device_present=False`` (planning only: :func:`iter_chunks` and
        :func:`num_chunks` with their block sizes given) checks a CUDA device's name but not that it is here."""
        from torchdpgmm._validation import check_delta

        if not self.mechanisms:
            raise ValueError("give at least one mechanism")
        self._validate_names(device_present)
        bad = [e for e in self.epsilons if not (math.isfinite(e) and e > 0)]
        if not self.epsilons or bad:
            raise ValueError(f"epsilons must be finite numbers > 0, got {bad[0] if bad else 'none'}")
        check_delta(self.delta)
        for name, vals, lo in (("N", self.Ns, 4), ("K", self.Ks, 2), ("d", self.ds, 1)):
            if not vals or any(int(v) != v or v < lo for v in vals):
                raise ValueError(f"{name} values must be integers >= {lo}")
        from torchdpgmm.montecarlo import default_min_class_size

        for n, k, d in itertools.product(self.Ns, self.Ks, self.ds):  # the trials' data need it (synthetic_data)
            need = default_min_class_size(int(d))
            if n < k * need:
                raise ValueError(f"N = {n} is too small for K = {k} classes in d = {d} dimensions: each class "
                                 f"needs d + 1 = {need} records, so N >= {k * need}")
        if self.trials < 1 or (self.block_size is not None and self.block_size < 1):
            raise ValueError("trials and block_size must be >= 1")
        if self.results_format not in FORMATS:
            raise ValueError(f"results_format must be one of {FORMATS}, got {self.results_format!r}")
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
        if self.mode == "sound" and self.adjacency is None:
            self.adjacency = DEFAULT_ADJACENCY   # recorded as such in sweep.json (never null for a sound sweep)

    def _validate_names(self, device_present: bool = True) -> None:
        """The public settings other than the numbers: names, repeats, the seed and the device (one line each)."""
        from torchdpgmm._validation import check_no_repeats, check_seed

        for name in ("mechanisms", "epsilons", "Ns", "Ks", "ds"):
            # the same trials counted twice: a doubled trial count and a too narrow interval
            check_no_repeats(name, getattr(self, name) or [])
        bad = [m for m in self.mechanisms if m not in MECHANISMS]
        if bad:
            raise ValueError(f"unknown mechanism {bad[0]!r} (choose from {', '.join(MECHANISMS)})")
        if "r1smg" in self.mechanisms:
            if self.mode == "sound":
                raise ValueError("mechanism 'r1smg' has no sound mode (it is not DP as calibrated; docs/privacy.md)")
            low = [int(d) for d in self.ds if isinstance(d, numbers.Real) and d <= 2]  # numpy ints too
            if low:
                raise ValueError(f"mechanism 'r1smg' needs d > 2 (R1SMG, Ji & Li 2024), got d = {low[0]}; "
                                 "leave r1smg out or use d >= 3")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.adjacency is not None and self.adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {', '.join(ADJACENCIES)}, got {self.adjacency!r}")
        check_seed(self.seed)
        _check_device_name(self.device, device_present)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_device_name(device: Any, present: bool = True) -> None:
    """``cpu`` or an available ``cuda[:i]`` (one-line ValueError otherwise; nothing is allocated); ``present=False``:
    any ``cuda[:i]`` (a plan made on a machine without the GPU)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be cpu or cuda[:index], got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda[:index], got {device!r}")
    if dev.type == "cuda" and present:
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: no CUDA GPU is available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")


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


def bytes_per_trial(spec: SweepSpec, N: int, K: int, d: int) -> float:
    """Analytic bytes one trial of a block holds at its peak, an estimate for sizing CPU blocks (on CUDA
    :func:`measure_bytes_per_trial` measures it instead): the larger of the data generation
    (:func:`~torchdpgmm.montecarlo.synthetic_data_bytes_per_trial`) and one mechanism's release over the epsilon
    grid with its KL evaluation (mechanisms run one after the other). Sound mode:
    :func:`torchdpgmm.release.sound.bytes_per_trial`; as-published mode: the label-flip differences (K, N, d)
    and the fit's (K, N, d) temporaries and the (E, K, d, d) released parameters, x16 headroom for the
    solvers' temporaries."""
    from torchdpgmm.montecarlo import synthetic_data_bytes_per_trial

    E = len(spec.epsilons)
    if spec.mode == "sound":
        from torchdpgmm.release.sound import bytes_per_trial as release_bytes

        release = release_bytes(int(N), int(spec.classes or K), int(d), epsilons=E)
    else:
        release = 8.0 * 16 * (2 * K * N * d + E * K * (d * d + d + 2))
    return float(max(synthetic_data_bytes_per_trial(int(N), int(K), int(d)), release))


def device_free_bytes(device: str) -> float | None:
    """Free memory of ``device`` in bytes: ``torch.cuda.mem_get_info`` on CUDA (after returning this process's
    cached blocks), ``MemAvailable`` of ``/proc/meminfo`` on CPU; None when unknown."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        return float(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _device_type(spec: SweepSpec) -> str:
    return "cuda" if str(spec.device).startswith("cuda") else "cpu"


def _block_memory(spec: SweepSpec, free: float | None, workers: int = 1) -> float:
    """Bytes one block may use: ``memory_budget`` (default 1 GiB on CPU, none on CUDA) and the device's free
    memory share (per worker)."""
    from torchdpgmm.montecarlo import DEFAULT_MEMORY_BUDGET

    kind = _device_type(spec)
    budget = spec.memory_budget or (DEFAULT_MEMORY_BUDGET if kind == "cpu" else float("inf"))
    if free is not None:
        budget = min(budget, FREE_FRACTION[kind] * free / max(1, workers))
    return budget


def _even_block(trials: int, rung: int) -> int:
    """The rung evened out over the trials: ``ceil(trials / n)`` with ``n = ceil(trials / rung)`` blocks."""
    n = -(-int(trials) // int(rung))
    return -(-int(trials) // n)


def auto_block_size(spec: SweepSpec, N: int, K: int, d: int, *, free: float | None, per_trial: float,
                    workers: int = 1) -> int:
    """The automatic block size: the largest rung of ``cap, cap/2, ..., MIN_AUTO_BLOCK`` (cap
    :data:`AUTO_BLOCK_CAP` of the device type) with ``rung * per_trial`` within the block memory (the
    budget and :data:`FREE_FRACTION` of ``free`` bytes, per worker), evened out over the trials
    (:func:`_even_block`). Refuses (one-line ValueError) when not even the bottom rung's block fits (the block
    it would run: ``min(MIN_AUTO_BLOCK, trials)`` trials or fewer once evened out)."""
    kind = _device_type(spec)
    memory = _block_memory(spec, free, workers)
    rung = AUTO_BLOCK_CAP[kind]
    while rung > MIN_AUTO_BLOCK and rung * per_trial > memory:
        rung //= 2
    block = _even_block(spec.trials, rung)
    if block * per_trial > memory:
        raise ValueError(f"a block of {block} trials at N={N}, K={K}, d={d} needs about "
                         f"{block * per_trial / 2 ** 20:.0f} MiB but {memory / 2 ** 20:.0f} MiB are available on "
                         f"{spec.device} (memory budget and free memory); raise --memory-budget or free memory")
    return block


#: trials of the probe block that measures the per-trial footprint on CUDA
PROBE_TRIALS = 256


def measure_bytes_per_trial(spec: SweepSpec, N: int, K: int, d: int, trials: int = PROBE_TRIALS) -> float | None:
    """Peak CUDA memory per trial of one probe block of ``trials`` trials (data, every mechanism's release and
    KL), from ``torch.cuda.max_memory_allocated``, x1.25 for the allocator's fragmentation; None on CPU. The
    probe draws from its own fixed seed and its rows are discarded."""
    import dataclasses

    import torch

    if _device_type(spec) != "cuda":
        return None
    dev = torch.device(spec.device)
    probe = dataclasses.replace(spec, trials=trials, block_size=trials, chunk_size=trials, seed=-1)
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    default_trial_fn(probe, Chunk(int(N), int(K), int(d), 0, 0, trials, trials))
    peak = torch.cuda.max_memory_allocated(dev) - base
    torch.cuda.empty_cache()
    return 1.25 * peak / trials


def resolve_block_sizes(spec: SweepSpec, workers: int = 1) -> dict[tuple[int, int, int], int]:
    """The block size of every configuration ``(N, K, d)``: ``spec.block_size`` when given (refused in one line
    when its estimated footprint exceeds ``memory_budget``), else :func:`auto_block_size` with the device's
    free memory (:func:`device_free_bytes`) and the per-trial footprint (measured on CUDA, analytic on CPU)."""
    spec.validate()
    out: dict[tuple[int, int, int], int] = {}
    free = None
    for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds):
        key = (int(N), int(K), int(d))
        if spec.block_size is not None:
            need = spec.block_size * bytes_per_trial(spec, *key)
            if spec.memory_budget is not None and need > spec.memory_budget:
                raise ValueError(f"--block-size {spec.block_size} needs about {need / 2 ** 20:.0f} MiB at N={N}, "
                                 f"K={K}, d={d}, more than --memory-budget {spec.memory_budget / 2 ** 20:.0f} MiB; "
                                 "use a smaller block size or a larger budget")
            out[key] = int(spec.block_size)
            continue
        if free is None:
            free = device_free_bytes(spec.device)
        per_trial = measure_bytes_per_trial(spec, *key) or bytes_per_trial(spec, *key)
        out[key] = auto_block_size(spec, *key, free=free, per_trial=per_trial, workers=workers)
    return out


def _blocks_of(spec: SweepSpec, blocks: dict | None) -> dict[tuple[int, int, int], int]:
    if blocks is not None:
        return blocks
    if spec.block_size is not None:
        return {(int(N), int(K), int(d)): int(spec.block_size) for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds)}
    return resolve_block_sizes(spec)


def chunk_size_for(spec: SweepSpec, N: int, K: int, d: int, block: int | None = None) -> int:
    """Trials per chunk: the spec's chunk size rounded up to whole blocks, else as many whole blocks as fit
    the memory budget, up to :data:`CHUNK_TRIALS` trials, at least one (``block``: the configuration's block
    size, default resolved from the spec)."""
    if block is None:
        block = _blocks_of(spec, None)[(int(N), int(K), int(d))]
    if spec.chunk_size is not None:  # rounded up to whole blocks (the unit of all computation)
        return -(-int(spec.chunk_size) // block) * block
    from torchdpgmm.montecarlo import DEFAULT_MEMORY_BUDGET

    budget = spec.memory_budget or DEFAULT_MEMORY_BUDGET
    fit = int(budget // (bytes_per_trial(spec, N, K, d) * block))
    return max(1, min(fit, CHUNK_TRIALS // block)) * block


def iter_chunks(spec: SweepSpec, blocks: dict[tuple[int, int, int], int] | None = None) -> Iterator[Chunk]:
    """Every chunk of the sweep, in a deterministic order, generated lazily: the plan of a sweep of
    10^12 trials costs no memory (a list of its chunks would grow without bound before any work).
    ``blocks`` maps ``(N, K, d)`` to its block size (default: ``spec.block_size``, else
    :func:`resolve_block_sizes`, which needs the device); with either given, a CUDA sweep can be planned on a machine
    without its GPU."""
    spec.validate(device_present=blocks is None and spec.block_size is None)
    blocks = _blocks_of(spec, blocks)
    for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds):
        bs = blocks[(int(N), int(K), int(d))]
        cs = chunk_size_for(spec, N, K, d, bs)
        for c, first in enumerate(range(0, spec.trials, cs)):
            yield Chunk(int(N), int(K), int(d), c, first, min(cs, spec.trials - first), bs)


def num_chunks(spec: SweepSpec, blocks: dict[tuple[int, int, int], int] | None = None) -> int:
    """How many chunks :func:`iter_chunks` yields (arithmetic, no plan in memory)."""
    spec.validate(device_present=blocks is None and spec.block_size is None)
    blocks = _blocks_of(spec, blocks)
    return sum(-(-spec.trials // chunk_size_for(spec, N, K, d, blocks[(int(N), int(K), int(d))]))
               for N, K, d in itertools.product(spec.Ns, spec.Ks, spec.ds))


def plan_chunks(spec: SweepSpec, blocks: dict[tuple[int, int, int], int] | None = None) -> list[Chunk]:
    """Every chunk of the sweep as a list (small sweeps; :func:`iter_chunks` streams them)."""
    return list(iter_chunks(spec, blocks))


#: a lower bound on the bytes of one CSV row (``kl,1,40,2,2,0,0,0.1`` and a line end): the disk check
#: below refuses only sweeps whose rows certainly do not fit
MIN_ROW_BYTES = 20
#: the same for a Parquet row: its KL value alone is 8 bytes (random doubles do not compress)
MIN_PARQUET_ROW_BYTES = 8


def result_rows(spec: SweepSpec) -> int:
    """Rows the finished sweep writes (one per mechanism, epsilon, (N, K, d) and trial)."""
    return spec.trials * len(spec.mechanisms) * len(spec.epsilons) * len(spec.Ns) * len(spec.Ks) * len(spec.ds)


def check_disk(spec: SweepSpec, out: str | Path) -> None:
    """Refuse (one-line ValueError) a sweep whose rows cannot fit on the disk of ``out``: they are written
    twice (the chunk files and the results file), at least :data:`MIN_ROW_BYTES` bytes each
    (:data:`MIN_PARQUET_ROW_BYTES` in Parquet)."""
    import shutil

    need = 2 * (MIN_PARQUET_ROW_BYTES if spec.results_format == "parquet" else MIN_ROW_BYTES) * result_rows(spec)
    p = Path(out).resolve()
    while not p.exists():
        p = p.parent
    usage = shutil.disk_usage(p)
    free = usage.free
    if need > free and (usage.total == 0 or not (p.is_dir() and os.access(p, os.W_OK | os.X_OK))):
        # not a full disk but no place for files at all (e.g. /proc: a file system of 0 bytes)
        raise ValueError(f"cannot write {out}: {p} is not a writable folder on a disk")
    if need > free:
        raise ValueError(f"this sweep writes {result_rows(spec):.3g} rows (at least {need / 1e9:.3g} GB) but "
                         f"{p} has {free / 1e9:.3g} GB free; use fewer trials or grid points")


def _kl_rows(spec: SweepSpec, mech: str, kl, chunk: Chunk, first: int, n: int) -> dict[str, np.ndarray]:
    """The rows of one block and mechanism as columns (epsilon-major, then trial)."""
    vals = kl.detach().to("cpu", non_blocking=False).numpy().astype(np.float64, copy=False)  # (E, T): one transfer
    E = len(spec.epsilons)
    return {"mechanism": np.full(E * n, mech, dtype=object),
            "epsilon": np.repeat(np.asarray(spec.epsilons, dtype=np.float64), n),
            "N": np.full(E * n, chunk.N, dtype=np.int64), "K": np.full(E * n, chunk.K, dtype=np.int64),
            "d": np.full(E * n, chunk.d, dtype=np.int64), "seed": np.full(E * n, spec.seed, dtype=np.int64),
            "trial": np.tile(np.arange(first, first + n, dtype=np.int64), E), "kl": vals.reshape(E * n)}


def _columns(rows: Any) -> dict[str, np.ndarray]:
    """A trial function's rows (a list of row dicts, a dict of columns or a list of column dicts) as one
    dict of columns in :data:`RESULT_FIELDS` order."""
    if isinstance(rows, dict):
        return {k: np.asarray(rows[k]) for k in RESULT_FIELDS}
    rows = list(rows)
    if rows and isinstance(rows[0], dict) and isinstance(rows[0].get("kl"), np.ndarray):
        return {k: np.concatenate([np.asarray(r[k]) for r in rows]) for k in RESULT_FIELDS}
    types = {"mechanism": object, "epsilon": np.float64, "kl": np.float64}
    return {k: np.asarray([r[k] for r in rows], dtype=types.get(k, np.int64)) for k in RESULT_FIELDS}


def _release_kl(spec: SweepSpec, mech: str, X, y, num_classes: int, eps, gen, data_classes: int | None = None):
    """Realised KL(released || fitted) (Appendix B), shape (E, T), for one mechanism over the epsilon grid;
    ``data_classes`` (the generated K, public) when it is smaller than ``num_classes`` (see :func:`_kl_of`)."""
    import torch

    from torchdpgmm.release import release

    if spec.mode == "sound":  # every epsilon in one batched call (model (E, T)); public facts from the spec only
        kw = {"clip_bound": spec.clip_bound, "adjacency": spec.adjacency or DEFAULT_ADJACENCY}
        rel = release(X, y, num_classes, [float(e) for e in spec.epsilons], spec.delta, mechanism=mech, mode="sound",
                      generator=gen, **kw)
        return _kl_of(rel, X, y, num_classes, data_classes)
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


def default_trial_fn(spec: SweepSpec, chunk: Chunk) -> dict[str, np.ndarray]:
    """Generate the chunk's synthetic datasets (Sec. V-A of Liu, Scaglione & Peisert 2025) block by block,
    release each with every mechanism over the epsilon grid, and return one row per (mechanism, epsilon,
    trial), as columns."""
    import torch

    from torchdpgmm.montecarlo import synthetic_data

    device = torch.device(spec.device)
    num_classes = int(spec.classes or chunk.K)
    rows: list[dict[str, np.ndarray]] = []
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
            rows.append(_kl_rows(spec, mech, kl, chunk, first, n))
    return _columns(rows)


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ValueError("results_format 'parquet' (--format parquet) needs pyarrow: pip install pyarrow "
                         "(or torchdpgmm[dev]); --format csv needs nothing") from None
    return pyarrow


def _suffix(spec: SweepSpec) -> str:
    return ".parquet" if spec.results_format == "parquet" else ".csv"


def _chunk_path(chunk_dir: Path, spec: SweepSpec, c: Chunk) -> Path:
    return chunk_dir / f"{c.id}{_suffix(spec)}"


def _arrow_table(cols: dict[str, np.ndarray]):
    pa = _pyarrow()
    return pa.table({"mechanism": pa.array(cols["mechanism"].astype(str)).dictionary_encode(),
                     **{k: pa.array(cols[k]) for k in RESULT_FIELDS[1:]}})


def _write_csv(fh, cols: dict[str, np.ndarray]) -> None:
    """Columns in :data:`RESULT_FIELDS` order as CSV, byte for byte what ``csv.writer`` writes for their rows.

    A chunk's rows come in runs that share every field but the last two (one mechanism and grid point per
    run), so each run's prefix is formatted once by ``csv.writer`` (its quoting) and only ``trial`` and ``kl``
    per row, by ``str.format`` in C: ``{!r}`` is the float text ``csv.writer`` writes. That is a quarter of the
    field conversions of a row-by-row ``writerows``, which took 1.7 of the 12.3 s of a profiled 10^5-trial
    sweep on an H100 (docs/gpu.md); columns of other types take ``writerows``."""
    w = csv.writer(fh)
    w.writerow(RESULT_FIELDS)
    trial, kl = cols["trial"], cols["kl"]
    if not (np.issubdtype(trial.dtype, np.integer) and np.issubdtype(kl.dtype, np.floating)):
        w.writerows(zip(*(cols[k].tolist() for k in RESULT_FIELDS)))
        return
    n = len(kl)
    start = np.zeros(n, dtype=bool)
    start[:1] = True
    for k in RESULT_FIELDS[:-2]:
        c = cols[k]
        start[1:] |= c[1:] != c[:-1]
    bounds = [*np.flatnonzero(start).tolist(), n]
    trial, kl = trial.tolist(), kl.tolist()
    head = io.StringIO(newline="")
    hw = csv.writer(head)
    for a, b in zip(bounds[:-1], bounds[1:]):
        head.seek(0)
        head.truncate()
        hw.writerow([*(cols[k][a:a + 1].tolist()[0] for k in RESULT_FIELDS[:-2]), ""])
        prefix = head.getvalue()[:-2].replace("{", "{{").replace("}", "}}")  # the run's fields, each with its comma
        fh.writelines(map((prefix + "{},{!r}\r\n").format, trial[a:b], kl[a:b]))


#: the one prefix of every temporary file a writer of ``OUT`` makes (the chunks and the results file, the summary,
#: the figure, progress.json and the manifest): what a killed writer leaves is ``.tmp-*`` in ``OUT`` or its chunks
_TMP = ".tmp-"
#: the temporary names of versions before that prefix (2026-12-02), for folders a killed older run left
_OLD_TEMPORARIES = (".summary.*.json", ".sweep.*.png", ".progress.json.tmp", ".sweep.json.tmp")


def _atomic(path: Path, mode: int | None = None):
    """:func:`~torchdpgmm.modelfile.atomic_path` with the folder's one temporary prefix: every file of ``OUT`` is
    written through it (``mode`` 0o644 for the shared results: chunks, results, summary, figure)."""
    from torchdpgmm.modelfile import atomic_path

    return atomic_path(path, mode, prefix=_TMP)


def _atomic_rows(path: Path, rows: Any) -> dict[str, np.ndarray]:
    """Write one chunk's rows (CSV or Parquet by the suffix of ``path``) atomically, readable by all; returns
    them as columns."""
    cols = _columns(rows)
    with _atomic(path, 0o644) as tmp:
        if path.suffix == ".parquet":
            _pyarrow().parquet.write_table(_arrow_table(cols), tmp)
        else:
            with open(tmp, "w", newline="") as fh:
                _write_csv(fh, cols)
    return cols


def _read_columns(path: Path) -> dict[str, np.ndarray]:
    """One chunk file's rows as typed columns."""
    if path.suffix == ".parquet":
        t = _pyarrow().parquet.read_table(path)
        cols = {k: t.column(k).to_numpy() for k in RESULT_FIELDS[1:]}
        cols["mechanism"] = np.asarray(t.column("mechanism").cast("string").to_pylist(), dtype=object)
        return {k: cols[k] for k in RESULT_FIELDS}
    with open(path, newline="") as fh:
        rd = csv.reader(fh)
        next(rd, None)
        raw = list(zip(*rd)) or [()] * len(RESULT_FIELDS)
    types = {"mechanism": object, "epsilon": np.float64, "kl": np.float64}
    return {k: np.asarray(raw[i], dtype=object).astype(types.get(k, np.int64)) if k != "mechanism"
            else np.asarray(raw[i], dtype=object) for i, k in enumerate(RESULT_FIELDS)}


def _block_key(N: int, K: int, d: int) -> str:
    return f"N{N}_K{K}_d{d}"


def _prepare(out: Path, spec: SweepSpec, resume: bool, workers: int = 1) -> dict[tuple[int, int, int], int]:
    """Create ``out``, check or write the manifest; returns the block sizes (a resume reuses the recorded ones,
    so the rows do not depend on the machine it runs on). Chunk files with no manifest beside them are refused:
    nothing says which sweep wrote them, and a chunk is reused by its name alone."""
    manifest = out / "sweep.json"
    chunk_dir = out / "chunks"
    if not manifest.exists() and _has_chunk_files(out):
        raise ValueError(f"{chunk_dir} holds files but {out} has no sweep.json, so nothing says which sweep wrote "
                         f"them (they would be reused as this sweep's rows); use another --out or delete {chunk_dir}")
    out.mkdir(parents=True, exist_ok=True)
    chunk_dir.mkdir(exist_ok=True)
    if manifest.exists():
        old, recorded, begun_with = _read_manifest(manifest)
        if old != spec.to_dict():
            raise ValueError(f"{out} holds a different sweep (see {manifest}); use another --out or delete it")
        if not resume:
            raise ValueError(f"{out} already holds this sweep; pass --resume to continue it")
        import torch

        if begun_with is not None and begun_with != torch.__version__:  # rows are bit-identical on one torch only
            raise ValueError(f"{out} was begun with torch {begun_with} and this is torch {torch.__version__}: a resume "
                             "would mix rows of two versions; resume with that torch, or use another --out")
        if recorded is not None:
            return recorded
    blocks = resolve_block_sizes(spec, workers)
    _write_manifest(manifest, spec, blocks)
    return blocks


def _read_manifest(manifest: Path) -> tuple[dict[str, Any], dict | None, str | None]:
    """``(spec fields, recorded block sizes or None, torch version or None)`` of a ``sweep.json``; one line
    when it is not one (corrupt, cut short, or another file)."""
    try:
        old = json.loads(manifest.read_text())
        if not isinstance(old, dict):
            raise TypeError
        recorded = old.pop("block_sizes", None)
        if recorded is not None:
            recorded = {tuple(int(v[1:]) for v in k.split("_")): int(b) for k, b in recorded.items()}
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
        raise ValueError(f"{manifest} is not a sweep manifest written by torchdpgmm sweep (corrupt or cut short); "
                         "use another --out or delete it") from None
    begun_with = old.pop("torch", None)       # manifests written before the field existed have none
    old.setdefault("results_format", "csv")   # manifests written before the field existed
    if old.get("mode") == "sound" and old.get("adjacency") is None:
        old["adjacency"] = "replace-one"      # what a null adjacency ran before the default became add-remove
    return old, recorded, begun_with


def _write_manifest(manifest: Path, spec: SweepSpec, blocks: dict[tuple[int, int, int], int]) -> None:
    import torch

    payload = dict(spec.to_dict(), block_sizes={_block_key(*k): int(b) for k, b in blocks.items()},
                   torch=torch.__version__)
    with _atomic(manifest) as tmp:
        tmp.write_text(json.dumps(payload, indent=2))


def _is_oom(exc: BaseException) -> bool:
    """An out-of-memory error, also when a worker process or Ray task re-raised it."""
    import torch

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)) or isinstance(exc, MemoryError):
            return True
        text = str(exc)
        if isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text):
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
        seen += 1
    return False


def run_sweep(spec: SweepSpec, out: str | Path, backend: str = "local", resume: bool = False,
              ray_address: str | None = None, progress: bool = True,
              trial_fn: Callable[[SweepSpec, Chunk], Any] | None = None,
              workers: int = 1, threads: int | None = 1) -> dict[str, Any]:
    """Run (or resume) a sweep; returns ``{"done": n, "skipped": n, "results": path, "summary": [...],
    "block_sizes": {"N.._K.._d..": trials}}``.

    ``backend="local"`` runs the chunks with ``threads`` torch intra-op threads each (default 1, see
    :func:`torch_threads`; None leaves torch's setting), in this process (``workers=1``) or in ``workers``
    spawned worker processes (at most ``2 * workers`` chunks in flight; each worker holds one chunk, so the
    working set is about ``workers`` times the chunk's); the rows do not depend on ``workers``. A trial
    function returns its rows as a list of row dicts or as a dict of columns. Running out of memory is a
    one-line ValueError (an automatic block is halved first while no chunk is on disk; module docstring). A new
    sweep that fails before any chunk is on disk takes its ``sweep.json`` and empty ``chunks/`` away again, so
    the corrected call is not refused as a different sweep; finished chunks are always kept for ``resume``."""
    if isinstance(out, str) and not out.strip():
        raise ValueError("out must name a folder, got an empty path")
    out = Path(out)
    spec.validate()
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    for name, v in (("workers", workers), ("threads", 1 if threads is None else threads)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if backend == "ray" and workers != 1:
        raise ValueError("workers applies to backend='local' (Ray schedules its own workers)")
    if spec.results_format == "parquet":
        _pyarrow()
    check_disk(spec, out)
    if backend == "ray":
        _check_ray_address(ray_address)
    fresh = not (out / "sweep.json").exists()
    try:
        blocks = _prepare(out, spec, resume, workers)
    except Exception as exc:   # the CUDA probe block (measure_bytes_per_trial) ran out of memory
        if not _is_oom(exc):
            raise
        _release_device_memory(spec)
        raise ValueError(f"out of memory on {spec.device} while measuring a probe block of "
                         f"{PROBE_TRIALS} trials: free memory on the device, or pass --block-size") from None
    _remove_temporaries(out)
    try:
        return _run_prepared(spec, out, blocks, trial_fn or default_trial_fn, backend, ray_address, progress,
                             workers, threads)
    except Exception:
        if fresh and not _has_chunk_files(out):
            _forget_manifest(out)
        raise


def _remove_temporaries(out: Path) -> None:
    """Delete what a killed writer left (no writer of the folder runs while a sweep starts)."""
    patterns = (f"{_TMP}*", *_OLD_TEMPORARIES)
    for stale in [*(out / "chunks").glob(f"{_TMP}*"), *(p for pat in patterns for p in out.glob(pat))]:
        if stale.is_file():
            stale.unlink(missing_ok=True)


def _has_chunk_files(out: Path) -> bool:
    chunk_dir = out / "chunks"
    return chunk_dir.is_dir() and any(not p.name.startswith(".") for p in chunk_dir.iterdir())


def _forget_manifest(out: Path) -> None:
    """Undo a new sweep that finished no chunk: its manifest, progress file and empty chunk folder."""
    for name in ("sweep.json", "progress.json"):
        with contextlib.suppress(OSError):
            (out / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        _remove_temporaries(out)
        (out / "chunks").rmdir()


def _run_prepared(spec: SweepSpec, out: Path, blocks: dict, fn: Callable, backend: str, ray_address: str | None,
                  progress: bool, workers: int, threads: int | None) -> dict[str, Any]:
    """:func:`run_sweep` once the manifest is in place: the pending chunks (an automatic block halved on out of
    memory while no chunk is on disk), then the results file, the summary and the figure."""
    chunk_dir = out / "chunks"
    total = num_chunks(spec, blocks)
    while True:
        try:
            done, summary = _run_pending(spec, blocks, out, fn, backend, ray_address, progress, workers, threads)
            break
        except Exception as exc:
            if not _is_oom(exc):
                raise
            _release_device_memory(spec)
            on_disk = any(_chunk_path(chunk_dir, spec, c).exists() for c in iter_chunks(spec, blocks))
            smaller = {k: _even_block(spec.trials, max(MIN_AUTO_BLOCK, -(-b // 2))) for k, b in blocks.items()}
            if spec.block_size is None and not on_disk and smaller != blocks:
                blocks = smaller      # nothing written with the larger blocks: restart with the next rung down
                _write_manifest(out / "sweep.json", spec, blocks)
                continue
            sizes = ", ".join(f"{b} trials" for b in sorted(set(blocks.values())))
            hint = ("use a smaller --block-size" if spec.block_size is not None else
                    "free memory on the device (or lower --memory-budget)")
            raise ValueError(f"out of memory on {spec.device} with blocks of {sizes}: {hint}; finished chunks are "
                             "kept, re-run with --resume to continue") from None
    results = out / f"results{_suffix(spec)}"
    _concat_chunks(results, (_chunk_path(chunk_dir, spec, c) for c in iter_chunks(spec, blocks)))
    block_sizes = {_block_key(*k): int(b) for k, b in blocks.items()}
    from torchdpgmm._provenance import environment
    from torchdpgmm.experiments import _jsonable

    # both written through temporary files renamed into place (never half written); NaN (an interval of one
    # trial) is JSON null
    with _atomic(out / "sweep.png", 0o644) as png, _atomic(out / "summary.json", 0o644) as js:  # shared: 0644
        plot_results(summary, png, spec=spec)
        js.write_text(json.dumps(_jsonable({"spec": spec.to_dict(), "block_sizes": block_sizes, "points": summary,
                                            "environment": environment(spec.device)}), indent=2))
    return {"done": done, "skipped": total - done, "results": str(results), "summary": summary,
            "block_sizes": block_sizes}


def _release_device_memory(spec: SweepSpec) -> None:
    import gc

    import torch

    gc.collect()
    if _device_type(spec) == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _run_pending(spec: SweepSpec, blocks: dict, out: Path, fn: Callable, backend: str, ray_address: str | None,
                 progress: bool, workers: int, threads: int | None) -> tuple[int, list[dict[str, Any]]]:
    """Run the chunks not yet on disk; returns how many ran and the summary. The summary folds every chunk in
    plan order as it is known: a chunk run here from the rows in memory, one already on disk read from its
    file (at most the chunks in flight wait out of order). The progress bar counts trials; ``OUT/progress.json``
    says the same for runs nobody watches (trials done and total, chunks, elapsed seconds, an estimate of the
    seconds left), rewritten atomically as chunks finish (at most once a second, and at the end)."""
    import time

    chunk_dir = out / "chunks"
    total = spec.trials * len(spec.Ns) * len(spec.Ks) * len(spec.ds)
    state = {"trials": 0, "ran": 0, "chunks": 0, "start": time.monotonic(), "written": 0.0}

    def report(force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - state["written"] < 1.0:
            return
        state["written"] = now
        elapsed = now - state["start"]
        rate = state["ran"] / elapsed if elapsed > 0 else 0.0
        left = total - state["trials"]
        payload = {"trials_done": state["trials"], "trials_total": total, "chunks_done": state["chunks"],
                   "elapsed_s": round(elapsed, 3), "eta_s": round(left / rate, 1) if rate > 0 else None}
        with _atomic(out / "progress.json") as tmp:
            tmp.write_text(json.dumps(payload))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.trials * len(spec.Ns) * len(spec.Ks) * len(spec.ds), desc="sweep", unit="trial")
    fold = _PlanOrderSummary()

    def pending_chunks() -> Iterator[Chunk]:
        # streamed: the chunks still to run are found lazily, so memory does not depend on the number of trials
        for c in iter_chunks(spec, blocks):
            path = _chunk_path(chunk_dir, spec, c)
            fold.expect(c)
            if not path.exists():
                yield c
            else:
                fold.put(c, path)
                state["trials"] += c.num_trials
                state["chunks"] += 1
                if bar is not None:
                    bar.update(c.num_trials)

    def finished(c: Chunk, cols: dict[str, np.ndarray]) -> None:
        fold.put(c, cols)
        state["trials"] += c.num_trials
        state["ran"] += c.num_trials
        state["chunks"] += 1
        report()
        if bar is not None:
            bar.update(c.num_trials)

    try:
        if backend == "local":
            done = _run_local(spec, pending_chunks(), chunk_dir, fn, workers, threads, finished)
        else:
            done = _run_ray(spec, pending_chunks(), out, fn, ray_address, finished)
        report(force=True)
    finally:
        if bar is not None:
            bar.close()
    return done, fold.result()


class _PlanOrderSummary:
    """Folds chunks into a :class:`_Summary` in plan order whatever order they finish in."""

    def __init__(self) -> None:
        self.acc, self.order, self.waiting, self.next, self.seen = _Summary(), {}, {}, 0, 0

    def expect(self, c: Chunk) -> None:
        self.order[c.id] = self.seen
        self.seen += 1

    def put(self, c: Chunk, cols_or_path: Any) -> None:
        self.waiting[self.order.pop(c.id)] = cols_or_path
        while self.next in self.waiting:
            x = self.waiting.pop(self.next)
            self.acc.add_columns(_read_columns(x) if isinstance(x, Path) else x)
            self.next += 1

    def result(self) -> list[dict[str, Any]]:
        return self.acc.result()


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


def _worker_chunk(fn: Callable, spec: SweepSpec, chunk: Chunk, threads: int | None) -> Any:
    with torch_threads(threads):
        return fn(spec, chunk)


def _run_local(spec: SweepSpec, todo: Iterable[Chunk], chunk_dir: Path, fn: Callable, workers: int,
               threads: int | None, finished: Callable[[Chunk, Any], None]) -> int:
    """Run the pending chunks here (``workers=1``) or in ``workers`` spawned processes, at most
    ``2 * workers`` chunks in flight (memory does not grow with the number of chunks); each chunk's rows
    are written by this process, atomically, as it finishes."""
    done = 0
    if workers == 1:
        for c in todo:
            finished(c, _atomic_rows(_chunk_path(chunk_dir, spec, c), _worker_chunk(fn, spec, c, threads)))
            done += 1
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
            ready, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in ready:
                c = pending.pop(fut)
                finished(c, _atomic_rows(_chunk_path(chunk_dir, spec, c), fut.result()))
                done += 1
    return done


def _concat_chunks(path: Path, parts: Iterable[Path]) -> None:
    """The results file: the chunk files in plan order, streamed (memory of one chunk), atomic. CSV: one
    header; Parquet: one row group per chunk."""
    with _atomic(path, 0o644) as tmp:
        if path.suffix == ".parquet":
            pa = _pyarrow()
            writer = None
            try:
                for p in parts:
                    table = pa.parquet.read_table(p)
                    if writer is None:
                        writer = pa.parquet.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
            finally:
                if writer is not None:
                    writer.close()
        else:
            with open(tmp, "wb") as fh:  # bytes: each chunk's rows copied whole, past its header line
                fh.write((",".join(RESULT_FIELDS) + "\r\n").encode())
                for p in parts:
                    with open(p, "rb") as src:
                        src.readline()
                        shutil.copyfileobj(src, fh)


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
             finished: Callable[[Chunk, Any], None]) -> int:
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
                finished(c, _atomic_rows(_chunk_path(out / "chunks", spec, c), ray.get(ref)))
                done += 1
    finally:
        if started_here:
            ray.shutdown()
    return done


def _chunk_files(out: Path, chunks: Iterable[Chunk] | None) -> Iterator[Path]:
    if chunks is None:
        # a chunk file is named by its id; dotfiles are temporary files a killed writer left (never results)
        yield from sorted(p for p in list((out / "chunks").glob("*.csv")) + list((out / "chunks").glob("*.parquet"))
                          if not p.name.startswith("."))
        return
    for c in chunks:
        for suffix in (".csv", ".parquet"):
            p = out / "chunks" / f"{c.id}{suffix}"
            if p.exists():
                yield p
                break


def iter_results(out: str | Path, chunks: Iterable[Chunk] | None = None) -> Iterator[dict[str, Any]]:
    """Stream the rows of every finished chunk (in plan order when ``chunks`` is given), with typed values."""
    for p in _chunk_files(Path(out), chunks):
        cols = _read_columns(p)
        lists = [cols[k].tolist() for k in RESULT_FIELDS]
        for vals in zip(*lists):
            yield dict(zip(RESULT_FIELDS, vals))


def load_results(out: str | Path, chunks: Iterable[Chunk] | None = None) -> list[dict[str, Any]]:
    """All rows in memory (small sweeps; use :func:`iter_results` to stream large ones)."""
    return list(iter_results(out, chunks))


#: values of one grid point buffered before they enter its running summary (a fixed partition of each point's
#: values in trial order, so the summary does not depend on the chunking)
SUMMARY_FLUSH = 65536


def summarize(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per grid point: mean, Student-t 95% CI, median / 5% / 95% quantiles, streaming over ``rows``.

    Exact running mean and variance (Chan et al.'s pairwise update); quantiles from a fixed log-grid
    histogram (:class:`~torchdpgmm.montecarlo.RunningStats`, relative resolution 1.2%), so memory does not
    grow with the number of trials."""
    acc = _Summary()
    for r in rows:
        acc.add((r["mechanism"], r["epsilon"], r["N"], r["K"], r["d"]), [r["kl"]])
    return acc.result()


class _Summary:
    """Running summaries per grid point, fed in trial order; values are buffered and flushed in slices of
    exactly :data:`SUMMARY_FLUSH` values per point."""

    def __init__(self) -> None:
        self.groups: dict[tuple, Any] = {}
        self.buf: dict[tuple, list[float]] = {}

    def add(self, key: tuple, values) -> None:
        from torchdpgmm.montecarlo import RunningStats

        if key not in self.groups:
            self.groups[key], self.buf[key] = RunningStats(), []
        b = self.buf[key]
        b.extend(np.asarray(values, dtype=np.float64).tolist())
        while len(b) >= SUMMARY_FLUSH:
            self.groups[key].update(b[:SUMMARY_FLUSH])
            del b[:SUMMARY_FLUSH]

    def add_columns(self, cols: dict[str, np.ndarray]) -> None:
        """One chunk's columns (the same numbers as its rows one by one; no per-row Python objects)."""
        keys = np.rec.fromarrays([cols["mechanism"].astype(str), cols["epsilon"], cols["N"], cols["K"], cols["d"]])
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        for u in np.argsort(first, kind="stable"):      # grid points in order of first appearance
            m, e, N, K, d = uniq[u].tolist()
            self.add((m, e, N, K, d), cols["kl"][inverse.reshape(-1) == u])

    def result(self) -> list[dict[str, Any]]:
        out = []
        for key, st in self.groups.items():
            if self.buf[key]:
                st.update(self.buf[key])
                self.buf[key] = []
            m, e, N, K, d = key
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
            settings.update(adjacency=spec.adjacency or DEFAULT_ADJACENCY, clip_bound=spec.clip_bound)
        else:
            settings.update(adjacency="label-flip")
    plot_curves(series_from_rows(rows, "epsilon"), path, x_label="epsilon", y_label="KL(released || fitted)",
                title="Sweep: KL vs epsilon", settings=settings, logx=True, logy=True)
