"""Wall time of one synthetic-classifier release (DCT -> noisy mean -> DP PCA -> unit ball -> class mixture) at
N = 60,000 Fashion-MNIST training images, d = 40 (at eps = 1, one Gaussian per class, and at eps = 5, eight
components per class: the defaults of ``components_rule``), next to one DP-SGD training of the study's chosen kind, both
measured in the same run, with the load average recorded.

    python scripts/synth_release_timing.py --out DIR [--repeats 5] [--threads 2] [--data-dir IDX_DIR]

Writes ``DIR/synth-release-timing.json``. ``--data-dir``: a folder of Fashion-MNIST IDX training files (default
Debian's ``dataset-fashion-mnist``; the tests give a small stand-in).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--repeats", type=_args.whole(1), default=5)
    p.add_argument("--threads", type=_args.whole(1), default=2)
    p.add_argument("--data-dir", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    a = p.parse_args(argv)
    _args.check_out(p, a.out, folder=True)
    _args.check_in(p, a.data_dir, "--data-dir", folder=True)
    from torchdpgmm.data import load_fashion_mnist
    from torchdpgmm.pipelines.dpsgd_fast import calibrate_noise_multiplier, train_dpsgd_fast
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, public_transform, release_pipeline

    torch.set_num_threads(a.threads)
    X, y = load_fashion_mnist(a.data_dir, split="train")
    X = X.reshape(X.shape[0], -1)
    load0 = os.getloadavg()
    rel_s, tr_s = [], []
    for r in range(a.repeats):
        t0 = time.perf_counter()
        rel = release_pipeline(X, y, num_classes=10, epsilon=1.0, delta=1e-5, generator=torch.Generator().manual_seed(r))
        rel_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        public_transform(X, "dct14")
        tr_s.append(time.perf_counter() - t0)
    rel8_s = []
    for r in range(a.repeats):  # the eps = 5 default: eight components per class (components_rule)
        t0 = time.perf_counter()
        rel8 = release_pipeline(X, y, num_classes=10, epsilon=5.0, delta=1e-5, generator=torch.Generator().manual_seed(r))
        rel8_s.append(time.perf_counter() - t0)
    feats = rel.pca.transform(public_transform(X, "dct14")).to(torch.float32)
    q, steps = 1024 / X.shape[0], int(5 * X.shape[0] / 1024)
    nm = calibrate_noise_multiplier(1.0, 1e-5, q, steps, feature_mu=0.08)
    t0 = time.perf_counter()
    train_dpsgd_fast(feats, y, num_classes=10, noise_multiplier=nm, sampling_rate=q, steps=steps, lr=1e-2,
                     n_public=float(X.shape[0]))  # the timing set's size (public here)
    sgd = time.perf_counter() - t0
    out = {"n": int(X.shape[0]), "d": PipelineConfig().n_components, "threads": a.threads,
           "release_seconds_median": statistics.median(rel_s), "release_seconds": rel_s,
           "public_transform_seconds_median": statistics.median(tr_s),
           "release_eps5_components": rel8.extras["components_per_class"],
           "release_eps5_seconds_median": statistics.median(rel8_s), "release_eps5_seconds": rel8_s,
           "dpsgd_one_training_seconds (batch 1024, 5 epochs)": sgd,
           "ratio_dpsgd_over_release": sgd / statistics.median(rel_s),
           "load_average_start": load0, "load_average_end": os.getloadavg(), "cpu_count": os.cpu_count()}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "synth-release-timing.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
