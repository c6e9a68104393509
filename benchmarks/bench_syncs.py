"""Host synchronisations, dispatched ops and memory per trial of the sound release, counted on CPU (issue 36).

On CUDA every read of a device value by the host (``.item()``, ``bool(t)``, ``int(t)``, ``nonzero``, boolean-mask
indexing, ``masked_select``, ``unique``, ``repeat_interleave`` without ``output_size``, a copy to the CPU) waits for
the card. Those reads are ATen ops, so a :class:`torch.utils._python_dispatch.TorchDispatchMode` sees them on any
device: :class:`OpCounter` counts them (and every dispatched op, and the live tensor bytes) while the release runs
on CPU, so the bounds hold without a GPU. (A copy to the host, ``.cpu()`` / ``.tolist()`` / ``.numpy()``, does not
dispatch on a CPU tensor: the release modules hold none, which a reader checks in the code.) Every host read is
counted, also those of public CPU scalars that would not wait for a GPU, so the counts are an upper bound:

* at most :data:`MAX_SYNCS` host reads per sound release call, whatever the number of trials;
* dispatched ops per call within 2x between 16 and 4,096 trials (``ops_ratio``);
* device memory per trial of one sweep block (release of all epsilons + the KL evaluation), N=1000, K=5, d=3:
  at most :data:`MAX_BYTES_PER_TRIAL` (the slope of the peak live bytes between two block sizes), checked
  against :func:`torchdpgmm.release.sound.bytes_per_trial`.

The public calibration (host math on Python floats, memoised per setting) is not part of the hot path: every
count is taken on a second call with the same settings (``warm``); the first call's counts are recorded too
(``cold``). ``accelerator_layout``: the same releases with the data "on a GPU" under the CUDA stand-in of
``tests/test_device_contract.py`` (FakeCuda, on the CPU), so the exact samplers and the PSD repair take their
accelerator paths (their CPU layout works in chunks whose number grows with the draws); ``device_reads`` counts
reads of would-be GPU tensors. Counted for the default sound release (mechanism ``kl``, discrete noise), continuous noise, the
two-stage release of :mod:`torchdpgmm.release.centring` and a batched-epsilon release of 7 epsilons.

Writes JSON (default ``benchmarks/results/bench_syncs.json``)::

    python benchmarks/bench_syncs.py [--trials 16 256 4096] [--block 64 256] [--out PATH] [--quick] [--stacks]
    python benchmarks/bench_syncs.py --device cuda      # -> benchmarks/results/bench_syncs_cuda.json

``--quick`` (the smoke test) uses 4 and 32 trials and blocks of 8 and 24. ``--device cuda`` (a GPU machine)
counts the synchronisations torch itself reports there and the peak device memory per trial, 1,000 and 10,000
trials, for the same releases, the sweep block and its stages (clip, class moments, the eq. (2) fit, eigh).
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import traceback
import weakref
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)

OUT = ROOT / "benchmarks" / "results" / "bench_syncs.json"
MAX_SYNCS = 5
MAX_BYTES_PER_TRIAL = 100_000
EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)

#: ops that make the host wait for the device (their result is read on the host)
SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "masked_select", "is_nonzero", "equal",
                      "unique", "_unique", "_unique2", "unique_consecutive", "unique_dim", "bincount", "histc",
                      "_assert_tensor_metadata_sync"})


def _is_bool_index(func_name: str, args: tuple) -> bool:
    if not func_name.startswith("index") or len(args) < 2 or not isinstance(args[1], (list, tuple)):
        return False
    return any(torch.is_tensor(t) and t.dtype in (torch.bool, torch.uint8) for t in args[1] if t is not None)


class OpCounter(TorchDispatchMode):
    """Counts dispatched ops, host-synchronising ops (``syncs``, by kind and by caller) and the peak of the live
    tensor bytes allocated while it is active (``peak_bytes``, storages counted once; tensors that exist before
    entering count only if passed to :meth:`track`)."""

    def __init__(self, stacks: bool = False) -> None:
        super().__init__()
        self.ops = 0
        self.by_op: collections.Counter = collections.Counter()
        self.syncs: collections.Counter = collections.Counter()
        self.where: collections.Counter = collections.Counter()
        self.stacks = stacks
        self.live = 0
        self.peak_bytes = 0
        self.peak_where = None
        self._storages: dict[int, list] = {}  # data_ptr -> [nbytes, live tensor count]

    # ---- memory: live bytes of the storages of the tensors seen ----
    def track(self, *tensors: torch.Tensor) -> None:
        for t in tensors:
            self._track(t)

    def _track(self, t: torch.Tensor) -> None:
        if not torch.is_tensor(t) or t.device.type == "meta":
            return
        st = t.untyped_storage()
        key, nbytes = st.data_ptr(), st.nbytes()
        if key == 0 or nbytes == 0:
            return
        entry = self._storages.get(key)
        if entry is None or entry[1] <= 0:
            entry = self._storages[key] = [nbytes, 0]
            self.live += nbytes
            if self.live > self.peak_bytes:
                self.peak_bytes = self.live
                if self.stacks:
                    self.peak_where = self._caller()
        entry[1] += 1
        weakref.finalize(t, self._untrack, key, entry)

    def _untrack(self, key: int, entry: list) -> None:
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            if self._storages.get(key) is entry:
                del self._storages[key]

    def reset_peak(self) -> None:
        self.peak_bytes = self.live

    # ---- dispatch ----
    def _caller(self) -> str:
        frames = [f for f in traceback.extract_stack() if "torchdpgmm" in f.filename]
        return " < ".join(f"{f.filename.split('torchdpgmm/')[-1]}:{f.lineno}" for f in frames[-3:][::-1])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        self.ops += 1
        self.by_op[name] += 1
        kind = None
        if name in SYNC_OPS or (name == "repeat_interleave" and kwargs.get("output_size") is None):
            kind = name
        elif _is_bool_index(name, args):
            kind = f"{name}[bool]"
        if kind is not None:
            self.syncs[kind] += 1
            if self.stacks:
                self.where[(kind, self._caller())] += 1
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if torch.is_tensor(t):
                self._track(t)
        return out

    @property
    def total_syncs(self) -> int:
        return sum(self.syncs.values())

    def summary(self) -> dict[str, Any]:
        return {"syncs": self.total_syncs, "syncs_by_kind": dict(self.syncs), "ops": self.ops,
                "peak_bytes": self.peak_bytes, "peak_where": self.peak_where,
                "sync_callers": {f"{k} @ {w}": n for (k, w), n in self.where.items()} if self.stacks else None}


def count(fn: Callable[[], Any], *, warm: bool = True, stacks: bool = False, track: tuple = ()) -> dict[str, Any]:
    """Run ``fn`` under an :class:`OpCounter` (after one uncounted call when ``warm``); returns its summary."""
    if warm:
        fn()
    with OpCounter(stacks=stacks) as c:
        c.track(*track)
        c.reset_peak()
        base = c.live
        fn()
    out = c.summary()
    out["peak_bytes_above_inputs"] = c.peak_bytes - base
    return out


# ----------------------------------------------------------------------------------------------------
# the releases counted
# ----------------------------------------------------------------------------------------------------

def data(trials: int, n: int = 1000, k: int = 5, d: int = 3, seed: int = 0):
    from torchdpgmm.montecarlo import synthetic_data

    b = synthetic_data(trials, n, k, d, generator=torch.Generator().manual_seed(seed))
    return b.X, b.y


def sound_release(X, y, k: int = 5, *, noise: str = "discrete", epsilon: Any = 1.0, **kw):
    from torchdpgmm.release import release

    g = torch.Generator(X.device).manual_seed(1)
    opts = {"clip_bound": 30.0, "adjacency": "replace-one", "noise": noise} | kw
    return lambda: release(X, y, k, epsilon, 1e-5, mechanism="kl", mode="sound", generator=g, **opts)


def centred_release(X, y, k: int = 5, *, noise: str = "discrete"):
    from torchdpgmm.release.centring import release_centred

    g = torch.Generator(X.device).manual_seed(1)
    d = X.shape[-1]
    return lambda: release_centred(X, y, k, 1.0, 1e-5, clip_bound=15.0, ball_center=torch.zeros(d, device=X.device),
                                   ball_radius=30.0, generator=g, noise=noise)


def sweep_block(X, y, k: int = 5, *, noise: str = "discrete"):
    """The work of one sweep block: every epsilon released (one call) and the KL evaluation."""
    from torchdpgmm import sweep

    spec = sweep.SweepSpec(mechanisms=["kl"], epsilons=list(EPSILONS), Ns=[X.shape[-2]], Ks=[k], ds=[X.shape[-1]],
                           trials=X.shape[0], mode="sound", clip_bound=30.0, adjacency="replace-one")
    eps = torch.tensor(EPSILONS, dtype=X.dtype, device=X.device)[:, None]
    g = torch.Generator(X.device).manual_seed(1)
    if noise == "discrete":
        return lambda: sweep._release_kl(spec, "kl", X, y, k, eps, g, data_classes=k)
    from torchdpgmm.release import release  # continuous: the same work with the float64 samplers
    from torchdpgmm.sweep import _kl_of

    return lambda: _kl_of(release(X, y, k, list(EPSILONS), 1e-5, mechanism="kl", mode="sound", generator=g,
                                  clip_bound=30.0, adjacency="replace-one", noise="continuous"), X, y, k, k)


def _fake_cuda():
    """``fake_cuda`` of tests/test_device_contract.py (a CUDA stand-in on the CPU), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_device_contract", ROOT / "tests" / "test_device_contract.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fake_cuda


def run(trials: list[int], blocks: list[int], stacks: bool = False) -> dict[str, Any]:
    from torchdpgmm.release.sound import bytes_per_trial

    res: dict[str, Any] = {"max_syncs": MAX_SYNCS, "max_bytes_per_trial": MAX_BYTES_PER_TRIAL, "releases": {}}
    cases = {
        "sound_kl_discrete": lambda X, y: sound_release(X, y),
        "sound_kl_continuous": lambda X, y: sound_release(X, y, noise="continuous"),
        "sound_kl_discrete_7eps": lambda X, y: sound_release(X, y, epsilon=list(EPSILONS)),
        "sound_kl_continuous_7eps": lambda X, y: sound_release(X, y, noise="continuous", epsilon=list(EPSILONS)),
        "centred_discrete": lambda X, y: centred_release(X, y),
        "centred_continuous": lambda X, y: centred_release(X, y, noise="continuous"),
    }
    for name, make in cases.items():
        rows = []
        for T in trials:
            X, y = data(T)
            fn = make(X, y)
            cold = count(fn, warm=False)
            warm = count(fn, stacks=stacks)
            rows.append({"trials": T, "warm": warm, "cold": {k: cold[k] for k in ("syncs", "ops")}})
        ops = [r["warm"]["ops"] for r in rows]
        res["releases"][name] = {"rows": rows, "max_syncs_warm": max(r["warm"]["syncs"] for r in rows),
                                 "ops_ratio": max(ops) / min(ops)}
    # the accelerator layout: the data "on a GPU" under tests/test_device_contract.py's FakeCuda (on the CPU), so the
    # samplers and the PSD repair take their accelerator paths; "device_reads" are reads of would-be GPU tensors
    fake = _fake_cuda()
    res["accelerator_layout"] = {}
    for name, make in list(cases.items())[:4]:
        rows = []
        for T in trials:
            Xc, yc = data(T)
            with fake() as mode:
                X, y = Xc.to("cuda"), yc.to("cuda")
                fn = make(X, y)
                fn()
                before = mode.syncs
                c = count(fn, warm=False)
                rows.append({"trials": T, "ops": c["ops"], "syncs": c["syncs"], "device_reads": mode.syncs - before})
        ops = [r["ops"] for r in rows]
        res["accelerator_layout"][name] = {"rows": rows, "ops_ratio": max(ops) / min(ops)}
    mem = {}
    for noise in ("discrete", "continuous"):
        pts = []
        for T in blocks:
            X, y = data(T)
            c = count(sweep_block(X, y, noise=noise), track=(X, y))
            pts.append({"trials": T, "peak_bytes": c["peak_bytes"], "inputs_bytes": X.nbytes + y.nbytes})
        (a, b) = pts[0], pts[-1]
        slope = (b["peak_bytes"] - a["peak_bytes"]) / (b["trials"] - a["trials"])
        mem[noise] = {"blocks": pts, "bytes_per_trial": slope,
                      "peak_over_trials_largest_block": b["peak_bytes"] / b["trials"]}
    est = bytes_per_trial(1000, 5, 3, epsilons=len(EPSILONS))
    res["sweep_block_memory"] = mem | {"N": 1000, "K": 5, "d": 3, "epsilons": list(EPSILONS),
                                       "estimate_bytes_per_trial": est}
    return res


def cuda_run(trials: list[int]) -> dict[str, Any]:
    """On a CUDA device: the synchronisations torch itself reports (``torch.cuda.set_sync_debug_mode("warn")``,
    with the line of the caller), the wall time per call and the peak device bytes per trial (``max_memory_allocated``
    above what was allocated before, plus the data) of each release, the sweep block, and its stages."""
    import time
    import warnings

    from torchdpgmm.mechanisms import clip_records
    from torchdpgmm.mixture import class_moments, fit_labeled

    dev = torch.device("cuda")
    res: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "releases": {}}
    for T in trials:
        X, y = (t.to(dev) for t in data(T))
        spd = torch.eye(3, dtype=torch.float64, device=dev).expand(len(EPSILONS), T, 5, 3, 3).contiguous()
        cases = {
            "sound_kl_discrete": sound_release(X, y), "sound_kl_continuous": sound_release(X, y, noise="continuous"),
            "sound_kl_discrete_7eps": sound_release(X, y, epsilon=list(EPSILONS)),
            "sound_kl_continuous_7eps": sound_release(X, y, noise="continuous", epsilon=list(EPSILONS)),
            "centred_discrete": centred_release(X, y), "sweep_block_discrete": sweep_block(X, y),
            "sweep_block_continuous": sweep_block(X, y, noise="continuous"),
            "stage_clip": lambda: clip_records(X, 30.0), "stage_class_moments": lambda: class_moments(X, y, 5),
            "stage_fit_labeled": lambda: fit_labeled(X, y, 5), "stage_eigh_7eps": lambda: torch.linalg.eigh(spd),
        }
        for name, fn in cases.items():
            try:
                fn()
            except torch.OutOfMemoryError as e:   # a stage can be too big for the card (raw batched eigh at 10^4
                torch.cuda.empty_cache()          # trials asks cuSOLVER for ~177 GiB): record it, measure the rest
                res["releases"].setdefault(name, []).append({"trials": T, "out_of_memory": str(e).splitlines()[0]})
                continue
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            torch.cuda.set_sync_debug_mode("warn")
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                fn()
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            where = collections.Counter(f"{Path(q.filename).name}:{q.lineno}" for q in w)
            res["releases"].setdefault(name, []).append({
                "trials": T, "syncs": len(w), "sync_lines": dict(where), "wall_s": wall,
                "peak_bytes_per_trial": (peak + X.nbytes + y.nbytes) / T})
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=_args.whole(1), nargs="+", default=[16, 256, 4096])
    p.add_argument("--block", type=_args.whole(1), nargs=2, default=[64, 256])
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--stacks", action="store_true", help="record where each host read comes from")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cuda: the synchronisations torch reports on the device, wall times and peak device memory")
    a = p.parse_args(argv)
    _args.check_quick_out(p, a.quick, a.out)
    _args.check_device(p, a.device)
    _args.check_out(p, a.out)
    if a.device == "cuda":
        res = cuda_run([1000, 10000] if not a.quick else [64])
        res["config"] = {"torch": torch.__version__, "python": platform.python_version(), "device": res["gpu"]}
        out = Path(a.out if a.out != str(OUT) else OUT.with_name("bench_syncs_cuda.json"))
        from torchdpgmm._provenance import environment as _environment

        res["provenance"] = _environment("cuda")  # commit (+dirty), versions, the card
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
        print(json.dumps({k: [(r["trials"], r["syncs"], round(r["peak_bytes_per_trial"])) if "syncs" in r
                              else (r["trials"], "out of memory") for r in v]  # an out-of-memory stage: no counts
                          for k, v in res["releases"].items()}, indent=1))
        return 0
    torch.set_num_threads(1)
    trials, blocks = ([4, 32], [8, 24]) if a.quick else (a.trials, a.block)
    res = run(trials, blocks, stacks=a.stacks)
    res["config"] = {"trials": trials, "blocks": blocks, "quick": a.quick, "torch": torch.__version__,
                     "python": platform.python_version(), "device": "cpu (dispatch-mode counts)"}
    from torchdpgmm._provenance import environment as _environment

    res["provenance"] = _environment("cpu")  # commit (+dirty), versions, machine
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    print(json.dumps({k: {"max_syncs_warm": v["max_syncs_warm"], "ops_ratio": round(v["ops_ratio"], 3)}
                      for k, v in res["releases"].items()}, indent=1))
    print(json.dumps({k: v["bytes_per_trial"] for k, v in res["sweep_block_memory"].items()
                      if isinstance(v, dict)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
