"""The ``torchdpgmm`` command.

``torchdpgmm experiment STUDY --out DIR [--trials T] [--seed S] [--device D]`` runs one of the studies
in :mod:`torchdpgmm.experiments` and writes ``DIR/STUDY.json`` (+ CSV and PNG).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")
    p.add_argument("--trials", type=int, default=None, help="Monte Carlo trials (default: the study's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole study (default 0)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default cpu)")
    p.add_argument(
        "--backend", default="local", choices=["local", "ray"], help="where trial chunks run (default local)"
    )
    p.add_argument("--quick", action="store_true", help="a small version of the study (smoke runs)")


MECHANISMS = ["kl", "laplace", "gaussian", "colored", "r1smg"]


def _add_release(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "release",
        help="fit a labeled GMM to a CSV/NPZ file and write a differentially private release (model.json)",
        description=(
            "Fit the class-conditional Gaussian mixture of a labeled table and release it under (epsilon, delta)-DP. "
            "Writes a JSON model file with the privacy record. Nothing is written when the input is invalid. "
            "mode 'as-published' reproduces paper 000 (label-level adjacency, known gaps: see docs/privacy.md); "
            "mode 'sound' protects records and needs --clip-bound."),
    )
    p.add_argument("--data", type=Path, required=True, help="input table: .csv (with header) or .npz (arrays X, y)")
    p.add_argument("--label-column", help="name of the label column (CSV)")
    p.add_argument("--features", help="comma-separated feature columns (default: every other column)")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--mechanism", default="kl", choices=MECHANISMS)
    p.add_argument("--mode", default="as-published", choices=["as-published", "sound"])
    p.add_argument("--variant", default=None, help="design variant for mechanism kl (as-published, global, exact-kl)")
    p.add_argument("--clip-bound", type=float, default=None, help="per-record L2 clipping bound B (sound mode)")
    p.add_argument("--seed", type=int, default=None, help="seed (default: fresh OS entropy)")
    p.add_argument("--out", type=Path, required=True, help="model file to write (JSON)")


def _add_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="draw synthetic labeled data from a released model file",
                       description="Draw synthetic data from a model file. By default the class histogram of the "
                                   "release is preserved (counts rescaled to -n by largest remainders).")
    p.add_argument("model", type=Path, help="model file written by 'torchdpgmm release'")
    p.add_argument("-n", type=int, required=True, help="number of rows")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--iid", action="store_true", help="draw labels i.i.d. from the weights instead of fixing the histogram")
    p.add_argument("--label-column", default="label")
    p.add_argument("--out", type=Path, required=True, help="CSV file to write")


def _csv_list(kind: type):
    def parse(text: str) -> list:
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {kind.__name__}: {text!r}")
    return parse


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a resumable grid of synthetic releases (mechanism x epsilon x N x K x d), locally or on Ray",
        description="Grid sweep over synthetic data (paper 000, Sec. V-A). Chunks of trials are written to "
                    "OUT/chunks as they finish; re-run with --resume after an interruption to continue. "
                    "Writes OUT/results.csv (one row per trial), OUT/summary.json and OUT/sweep.png.")
    p.add_argument("--mechanisms", type=_csv_list(str), default=["kl", "gaussian", "laplace"])
    p.add_argument("--epsilons", type=_csv_list(float), default=[0.5, 1.0, 2.0])
    p.add_argument("--N", type=_csv_list(int), default=[1000], dest="Ns")
    p.add_argument("--K", type=_csv_list(int), default=[5], dest="Ks")
    p.add_argument("--d", type=_csv_list(int), default=[3], dest="ds")
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--chunk-size", type=int, default=50)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--variant", default="as-published")
    p.add_argument("--mode", default="as-published", choices=["as-published", "sound"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="local", choices=["local", "ray"])
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted sweep in --out")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", type=Path, required=True)


def build_parser() -> argparse.ArgumentParser:
    from torchdpgmm.experiments import available_studies

    parser = argparse.ArgumentParser(
        prog="torchdpgmm",
        description="Differentially private Gaussian mixture releases and their Monte Carlo studies.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_release(sub)
    _add_sample(sub)
    _add_sweep(sub)
    exp = sub.add_parser(
        "experiment",
        help="run a reproducible study (figure or table) and write JSON/CSV/PNG",
        description="Run a study; writes DIR/STUDY.json ({study, config, rows}), DIR/STUDY.csv and DIR/STUDY.png.",
    )
    studies = exp.add_subparsers(dest="study", metavar="STUDY")
    for name, study in available_studies().items():
        sp = studies.add_parser(name, help=study.help, description=study.help)
        _add_common(sp)
        if study.add_arguments is not None:
            study.add_arguments(sp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "experiment":
        if args.study is None:
            parser.parse_args(["experiment", "--help"])
            return 2
        from torchdpgmm.experiments import ExperimentConfig, run_study

        common = {"out", "trials", "seed", "device", "backend", "quick", "command", "study"}
        options = {k: v for k, v in vars(args).items() if k not in common}
        cfg = ExperimentConfig(
            out=args.out,
            trials=args.trials,
            seed=args.seed,
            device=args.device,
            backend=args.backend,
            quick=args.quick,
            options=options,
        )
        try:
            payload = run_study(args.study, cfg)
        except ValueError as exc:
            print(f"torchdpgmm: error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.out / (args.study + '.json')} ({len(payload['rows'])} rows, "
              f"{payload['runtime_seconds']:.1f} s)")
        return 0
    try:
        if args.command == "release":
            return _cmd_release(args)
        if args.command == "sample":
            return _cmd_sample(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
    except ValueError as exc:
        print(f"torchdpgmm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


def _generator(seed: int | None):
    import torch

    g = torch.Generator()
    if seed is None:
        g.seed()
    else:
        g.manual_seed(seed)
    return g


def _cmd_release(args: argparse.Namespace) -> int:
    from torchdpgmm._validation import check_privacy_params
    from torchdpgmm.datafile import read_labeled_table
    from torchdpgmm.modelfile import model_to_dict, save_model

    check_privacy_params(args.epsilon, args.delta)
    features = None if args.features is None else [f.strip() for f in args.features.split(",") if f.strip()]
    table = read_labeled_table(args.data, args.label_column, features)
    from torchdpgmm.release import release

    kwargs = {}
    if args.variant is not None:
        kwargs["variant"] = args.variant
    if args.clip_bound is not None:
        kwargs["clip_bound"] = args.clip_bound
    rel = release(table.X, table.y, table.num_classes, args.epsilon, args.delta, mechanism=args.mechanism,
                  mode=args.mode, generator=_generator(args.seed), **kwargs)
    model_to_dict(rel.model, rel.privacy, table.class_names, table.feature_names)  # validate before writing
    save_model(args.out, rel.model, rel.privacy, table.class_names, table.feature_names)
    print(f"wrote {args.out}: K={table.num_classes}, d={table.X.shape[1]}, N={table.X.shape[0]}, "
          f"epsilon={rel.privacy.epsilon}, delta={rel.privacy.delta}, mode={rel.privacy.mode}")
    for note in rel.privacy.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _cmd_sample(args: argparse.Namespace) -> int:
    from torchdpgmm.datafile import write_labeled_csv
    from torchdpgmm.mixture import histogram_counts
    from torchdpgmm.modelfile import load_model

    if args.n < 1:
        raise ValueError("-n must be >= 1")
    mf = load_model(args.model)
    g = _generator(args.seed)
    model = mf.model
    if args.iid:
        x, y = model.sample(args.n, g)
    else:
        counts = histogram_counts(model.counts if model.counts is not None else model.weights, args.n)
        x, y, _ = model.sample_counts(counts, g)
    write_labeled_csv(args.out, x, y, mf.class_names, mf.feature_names, args.label_column)
    print(f"wrote {args.out}: {args.n} rows")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from torchdpgmm.sweep import SweepSpec, run_sweep

    spec = SweepSpec(mechanisms=args.mechanisms, epsilons=args.epsilons, Ns=args.Ns, Ks=args.Ks, ds=args.ds,
                     trials=args.trials, chunk_size=args.chunk_size, seed=args.seed, delta=args.delta,
                     variant=args.variant, mode=args.mode, device=args.device)
    res = run_sweep(spec, args.out, backend=args.backend, resume=args.resume, ray_address=args.ray_address,
                    progress=not args.no_progress)
    print(f"sweep in {args.out}: {res['done']} chunks run, {res['skipped']} already done; rows in {res['results']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
