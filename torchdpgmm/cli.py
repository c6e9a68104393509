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


def build_parser() -> argparse.ArgumentParser:
    from torchdpgmm.experiments import available_studies

    parser = argparse.ArgumentParser(
        prog="torchdpgmm",
        description="Differentially private Gaussian mixture releases and their Monte Carlo studies.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
