"""The ``torchdpgmm`` command: ``release``, ``sample``, ``sweep``, ``experiment``, ``audit``.

Every release defaults to the sound mode (record-level DP with public ``--classes`` and ``--clip-bound``);
``--mode as-published`` must be asked for and prints that it is label-level and not a valid DP guarantee.

Errors. Every bad input to every command (unknown flags, invalid combinations, unreadable data, no GPU for
``--device cuda``, ...) prints ONE line on stderr and exits with status 2, before anything is written; an
output folder that a failing command created is removed again (a sweep's, unless it holds finished chunks:
those are kept for ``--resume``). Ctrl-C exits with status 130 (for a sweep, with a one-line hint to ``--resume``).
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

MECHANISMS = ["kl", "laplace", "gaussian", "colored", "r1smg"]
MODES = ["sound", "as-published"]
ADJACENCIES = ["add-remove", "replace-one"]


class UsageError(ValueError):
    """A command-line error; ``main`` prints it as one line and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (argparse prints the usage block too)."""

    def error(self, message: str):  # type: ignore[override]
        import re

        if self.prog.endswith(" experiment") and "invalid choice" in message:
            got = re.search(r"invalid choice: '([^']*)'", message)  # a misspelt study, or a flag's value read as one
            raise UsageError(f"{self.prog}: error: unknown study {got.group(1) if got else '?'!r}: a study is needed "
                             "first: torchdpgmm experiment STUDY [--out DIR ...] (torchdpgmm experiment --help lists "
                             "the studies)")
        m = re.match(r"argument (--[\w-]+): invalid _?(floats|ints|float|int) value", message)
        if m:  # argparse names the converter function ("invalid _floats value"): say what is expected instead
            kind = "numbers" if m.group(2).startswith("float") else "whole numbers"
            many = m.group(2).endswith("s")
            what = f"comma-separated {kind}" if many else ("a number" if kind == "numbers" else "a whole number")
            raise UsageError(f"{self.prog}: error: {m.group(1)} must be {what}")
        m = re.match(r"argument (--[\w-]+): (must .*)", message)
        if m:
            raise UsageError(f"{self.prog}: error: {m.group(1)} {m.group(2)}")
        raise UsageError(f"{self.prog}: error: {message}")


def _bytes(text: str) -> float:
    """``--memory-budget``'s type: :func:`torchdpgmm._validation.byte_count` (imported here, when a budget is given:
    the command line starts without torch)."""
    from torchdpgmm._validation import byte_count

    return byte_count(text)


_bytes.__name__ = "byte count"


def _csv_list(kind: type):
    what = {float: "numbers", int: "whole numbers"}.get(kind, "values")

    def parse(text: str) -> list:
        items = [v.strip() for v in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"must be a non-empty list of comma-separated {what}, got {text!r}")
        if not all(items):  # 'a,,b' is a typo, not the class set {a, b}: said, not dropped
            raise argparse.ArgumentTypeError(f"must not hold an empty value (two commas in a row, or a comma at "
                                             f"an end), got {text!r}")
        try:
            vals = [kind(v) for v in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be comma-separated {what}, got {text!r}") from None
        dup = sorted({str(v) for v in vals if vals.count(v) > 1})
        if dup:  # a repeated value would double rows (and trials) silently
            raise argparse.ArgumentTypeError(f"must not repeat a value (names {', '.join(dup)} twice)")
        return vals
    return parse


def _out_folder(text: str) -> Path:
    """``--out``'s type for output folders: an empty text is refused (it was read as the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, got an empty path")
    return Path(text)


_out_folder.__name__ = "folder"


def _escape(text: str | None) -> str | None:
    """argparse %-formats help strings: a literal '%' (e.g. '95% CI') must be doubled."""
    return None if text is None else text.replace("%", "%%")


def _add_privacy_flags(p: argparse.ArgumentParser, *, classes: bool = True, bounds: bool = True) -> None:
    """``bounds=False``: the command has no --bounds / --schema (the sweep), and the help names none."""
    p.add_argument("--mode", default="sound", choices=MODES,
                   help="sound (default): record-level DP with clipping; as-published: the paper's label-level "
                        "mechanism, NOT a valid DP guarantee (must be asked for by name)")
    p.add_argument("--clip-bound", type=float, default=None,
                   help="public per-record L2 bound B (sound mode: required there unless --bounds or --schema give "
                        "public ranges, then optional and in unit-box units; refused in as-published mode)" if bounds
                   else "public per-record L2 bound B (required in sound mode; refused in as-published mode)")
    p.add_argument("--adjacency", default=None, choices=ADJACENCIES,
                   help="neighbouring datasets in sound mode (default add-remove)")
    if classes:
        p.add_argument("--classes", type=_csv_list(str), default=None,
                       help="the public class set, comma separated (required in sound mode; never read from the data)")


def _add_release(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "release",
        help="fit a labeled GMM to a CSV/NPZ file and write a differentially private release (model.json)",
        description=(
            "Fit the class-conditional Gaussian mixture of a labeled table and release it under (epsilon, delta)-DP. "
            "Writes a JSON model file with the privacy record. Nothing is written when the input is invalid. "
            "Default mode 'sound': record-level DP; needs --classes (the public class set) and either --bounds / "
            "--schema (public column ranges; --clip-bound then optional) or --clip-bound. "
            "Mode 'as-published' reproduces Liu, Scaglione & Peisert (2025): label-level, not a valid DP guarantee "
            "(docs/privacy.md)."),
    )
    p.add_argument("--data", type=Path, required=True, help="input table: .csv (with header) or .npz (arrays X, y)")
    p.add_argument("--label-column", help="name of the label column (CSV)")
    p.add_argument("--features", type=_csv_list(str), default=None,
                   help="comma-separated feature columns of a CSV, never the label column (default: the columns "
                        "--bounds COL=LOW:HIGH,... or --schema name; without any of them a CSV release asks for "
                        "--features)")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--mechanism", default="kl", choices=MECHANISMS)
    _add_privacy_flags(p)
    p.add_argument("--variant", default=None, choices=["as-published", "global", "exact-kl"],
                   help="design variant for mechanism kl in as-published mode")
    p.add_argument("--covariance-type", default="auto", choices=["auto", "full", "tied", "diag", "spherical"],
                   help="covariance structure of the sound release: auto (default) shrinks full -> tied -> diag "
                        "from released values (torchdpgmm.release.covariance_rule); the others as in sklearn's GaussianMixture")
    p.add_argument("--seed", type=int, default=None,
                   help="seed (default: fresh OS entropy; a seeded sound release is reproducible but its noise "
                        "is not secret: the record says so)")
    p.add_argument("--check-settings", action="store_true",
                   help="dry run for the data owner: read the data, print warnings about the settings (delta >= 1/N, "
                        "epsilon > 10, a clip bound that clips > 50%% or < 1%% of rows) and exit without releasing or "
                        "writing anything; its output depends on the data: never publish it")
    _add_bounds_flags(p)
    p.add_argument("--center", default=None, choices=["noisy-mean", "box"],
                   help="with --bounds: where records are clipped in the unit box. noisy-mean (the default) releases "
                        "a private centre first with a small share of the budget and clips about it (default clip "
                        "bound CENTRED_CLIP_RADIUS = 1/2, the ball inscribed in the box); box clips about the box's middle (default "
                        "CLIP_FRACTION*sqrt(d)/2); torchdpgmm.bounds, torchdpgmm.release.centring")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out model file")
    _add_strict_flag(p)
    p.add_argument("--out", type=Path, default=None,
                   help="model file to write (JSON, ending in .json); required unless --check-settings")


def _add_strict_flag(p: argparse.ArgumentParser, *, modes: bool = True) -> None:
    p.add_argument("--strict", action="store_true",
                   help="treat every warning as an error: a weak budget, a seed, " + ("as-published mode, " if modes else "")
                        + "or a release "
                        "that is mostly noise exits with status 2 and writes nothing (without --strict the release "
                        "is written, exit status 0, and each warning is one line on stderr)")


def _add_bounds_flags(p: argparse.ArgumentParser, *, pipeline: bool = False) -> None:
    where = ("the pipeline runs on the centred unit box they map to, with the table defaults (no image transform, "
             "clips of torchdpgmm.bounds.table_pipeline_clips)" if pipeline else
             "the release runs in the unit box they map to, --clip-bound becomes optional (a public fraction of "
             "sqrt(d)/2 there, in unit-box units: records farther from the centre are pulled onto that sphere; "
             "sqrt(d)/2 about the box's middle clips nothing inside the bounds)")
    p.add_argument("--bounds", default=None,
                   help="public per-column bounds, LOW:HIGH for every feature or COL=LOW:HIGH,COL=LOW:HIGH naming "
                        f"each feature (never read from the data): {where}, and records outside the bounds are "
                        "clipped into them")
    p.add_argument("--schema", type=Path, default=None,
                   help='JSON file {"columns": {"Ht": [140, 210], ...}} with the same public bounds as --bounds')
    p.add_argument("--discrete", default=None,
                   help="public integer-valued columns, comma separated (integer bounds); a one-hot group as "
                        "A+B+C (bounds 0:1 each): synthetic rows round them to integers inside the bounds, and "
                        "set exactly one column of a group to 1 (needs --bounds or --schema)")


def _add_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="draw synthetic labeled data from a released model file",
                       description="Draw synthetic data from a model file. By default the class histogram of the "
                                   "release is preserved (counts rescaled to -n by largest remainders).")
    p.add_argument("model", type=Path, help="model file written by 'torchdpgmm release'")
    p.add_argument("-n", type=int, required=True, help="number of rows")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--iid", action="store_true", help="draw labels i.i.d. from the weights instead of fixing the histogram")
    p.add_argument("--label-column", default="label")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    p.add_argument("--out", type=Path, required=True, help="CSV file to write (ending in .csv)")


def _add_synthesize(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synthesize",
        help="release the accounted image pipeline (DP PCA + class mixture) and write DP synthetic training data",
        description=(
            "Run the synthetic-data pipeline of docs/realdata.md on private training images (public DCT, noisy mean, "
            "DP PCA, unit ball, sound class-mixture release; one privacy record for all of it) and write "
            "DIR/release.json (the released projection and mixture with the record) and, with -n, DIR/synthetic.csv "
            "(synthetic rows in the released feature space). Record-level DP; nothing is written on bad input."),
    )
    p.add_argument("--data", type=Path, required=True,
                   help="a folder of IDX files in MNIST's layout (train-images-idx3-ubyte, train-labels-idx1-ubyte), "
                        "or a .npz (arrays X, y) / .csv table with one 28x28 image per row; uint8 pixels (IDX, or an "
                        "NPZ's uint8 X without --bounds) are divided by 255, a CSV's cells are taken as written "
                        "(the default clips assume pixels in [0, 1])")
    p.add_argument("--label-column", help="name of the label column (CSV)")
    p.add_argument("--classes", type=_csv_list(str), required=True,
                   help="the public class set, comma separated (for IDX labels: 0,1,...,9); never read from the data")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--adjacency", default="add-remove", choices=ADJACENCIES)
    p.add_argument("--components-per-class", type=int, default=None,
                   help="Gaussians per class (default: the public rule, 1 below epsilon 1.5, 8 from there)")
    p.add_argument("--covariance-type", default="full", choices=["full", "tied", "diag", "spherical"])
    p.add_argument("--class-rule", default="auto", choices=["legacy", "auto"],
                   help="how the class stage estimates the class covariances: auto (default; the tabular noise-aware "
                        "rule with a released pooled block, inside the same budget) or legacy (eta/(eta+tau) "
                        "shrinkage toward the pooled class covariance)")
    p.add_argument("--image-transform", default=None, choices=["dct14", "none"],
                   help="fixed public transform: dct14 (28x28 images; the default) or none (raw columns; the default "
                        "with --bounds / --schema, a table)")
    p.add_argument("--n-components", type=int, default=None,
                   help="dimension d of the DP PCA (default 40 for dct14; with --image-transform none, as with "
                        "--bounds, the number of features)")
    p.add_argument("--mean-clip", type=float, default=None,
                   help="public L2 bound of the transformed records for the noisy mean (default 14, suits pixels in "
                        "[0, 1]; with --bounds sqrt(d)/2 in the centred unit box)")
    p.add_argument("--pca-clip", type=float, default=None, help="public L2 bound of the centred records for the "
                                                                "DP PCA (default 10; with --bounds sqrt(d)/4)")
    p.add_argument("--radius", type=float, default=None, help="public radius: projected records are divided by it "
                                                              "and clipped into the unit ball (default 5; with "
                                                              "--bounds sqrt(d)/4)")
    _add_bounds_flags(p, pipeline=True)
    p.add_argument("-n", type=int, default=None, help="also write this many synthetic rows to DIR/synthetic.csv")
    _add_strict_flag(p, modes=False)
    p.add_argument("--seed", type=int, default=None,
                   help="seed (default: fresh OS entropy; a seeded release is reproducible but its noise is not "
                        "secret: the record says so)")
    p.add_argument("--out", type=Path, required=True, help="output folder (created; must not hold a release already)")


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a resumable grid of synthetic releases (mechanism x epsilon x N x K x d), locally or on Ray",
        description="Grid sweep over synthetic data (Liu, Scaglione & Peisert 2025, Sec. V-A). Chunks of trials "
                    "are written to OUT/chunks as they finish; after an interruption re-run the same command with "
                    "--resume. Writes OUT/results.csv (or, with --format parquet, OUT/results.parquet; one row per "
                    "trial), OUT/summary.json and OUT/sweep.png. "
                    "Sound mode (default) needs --clip-bound; the synthetic classes 0..K-1 are public.")
    p.add_argument("--mechanisms", type=_csv_list(str), default=["kl", "gaussian", "laplace"])
    p.add_argument("--epsilons", type=_csv_list(float), default=[0.5, 1.0, 2.0])
    p.add_argument("--N", type=_csv_list(int), default=[1000], dest="Ns")
    p.add_argument("--K", type=_csv_list(int), default=[5], dest="Ks")
    p.add_argument("--d", type=_csv_list(int), default=[3], dest="ds")
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--chunk-size", type=int, default=None,
                   help="trials per chunk file / task (default: sized by --memory-budget)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of the local backend (default 1: a trial block's batched problems are "
                        "small, so more threads mostly add contention; rows do not depend on it)")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes of the local backend, one chunk each (default 1; e.g. one per core; "
                        "rows do not depend on it, except that an automatic block shrinks to fit each worker's share "
                        "of free memory: sweep.json records the blocks, --block-size pins them)")
    p.add_argument("--memory-budget", type=_bytes, default=None,
                   help="bytes one block of trials may hold on --device, e.g. 2e9, 512MiB or 4GB (default 1 GiB on "
                        "cpu, the free memory on cuda); it sizes the automatic block and the chunks. Summaries "
                        "stream over the chunk files, so memory stays that of one chunk")
    p.add_argument("--block-size", type=int, default=None,
                   help="trials per batched release call and per seed (default: automatic, the largest of a "
                        "fixed ladder that fits the device's free memory: rows are the same on every machine "
                        "that fits its top rung; docs/gpu.md)")
    p.add_argument("--format", default="csv", choices=["csv", "parquet"], dest="results_format",
                   help="results file: csv (default) or parquet (columnar and compressed, for 10^5+ trials; "
                        "needs pyarrow)")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--variant", default=None, choices=["as-published", "global", "exact-kl"],
                   help="design variant for mechanism kl in as-published mode")
    _add_privacy_flags(p, classes=False, bounds=False)
    p.add_argument("--classes", type=int, default=None,
                   help="public number of classes C of the synthetic labels 0..C-1 (sound mode; default each grid "
                        "point's K; must be >= every K)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="local", choices=["local", "ray"])
    p.add_argument("--ray-address", default=None, help="Ray cluster address host:port or ray://host:port "
                   "(default: start a local Ray); one that accepts no connection within 15 s is an error")
    p.add_argument("--resume", action="store_true", help="continue an interrupted sweep in --out")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is shown only when stderr is a terminal; OUT/progress.json is written "
                        "either way)")
    p.add_argument("--out", type=_out_folder, required=True)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=_out_folder, default=Path("results"), help="output folder (default: results)")
    p.add_argument("--trials", type=int, default=None, help="Monte Carlo trials (default: the study's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole study (default 0)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default cpu)")
    p.add_argument(
        "--backend", default="local", choices=["local", "ray"],
        help="local only: the studies run in this process, and ray is refused in one line (torchdpgmm sweep "
             "--backend ray runs a sweep's chunks on Ray)"
    )
    p.add_argument("--quick", action="store_true", help="a small version of the study (smoke runs)")


def _add_study(sub: argparse._SubParsersAction, name: str, study: Any, *, command: str | None = None,
               help_text: str | None = None) -> None:
    sp = sub.add_parser(command or name, help=_escape(help_text or study.help), description=_escape(study.help))
    _add_common(sp)
    if study.add_arguments is not None:
        study.add_arguments(sp)
    sp.set_defaults(study=name)


_STUDY_COMMANDS = ("experiment", "audit")
_EXPERIMENT_HELP = "run a reproducible study (figure or table) and write JSON/CSV/PNG"
_AUDIT_HELP = "audit the privacy claims empirically (the 'audit' study; same options)"


def build_parser(*, studies: bool = True) -> argparse.ArgumentParser:
    """The whole CLI. ``studies=False`` gives ``experiment`` and ``audit`` as bare entries (their names and help
    in ``torchdpgmm --help``) without their options: the full subparsers import every study module (torch,
    scikit-learn, matplotlib, ...), so :func:`main` builds them only when the command is one of them, and
    ``--version``, ``--help`` and the other commands start without importing torch."""
    from torchdpgmm import __version__

    parser = _Parser(prog="torchdpgmm",
                     description="Differentially private Gaussian mixture releases and their Monte Carlo studies.")
    parser.add_argument("--version", action="version", version=f"torchdpgmm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_release(sub)
    _add_sample(sub)
    _add_synthesize(sub)
    _add_sweep(sub)
    if not studies:
        sub.add_parser("experiment", help=_EXPERIMENT_HELP, add_help=False)
        sub.add_parser("audit", help=_escape(_AUDIT_HELP), add_help=False)
        return parser
    from torchdpgmm.experiments import available_studies

    exp = sub.add_parser(
        "experiment",
        help=_EXPERIMENT_HELP,
        description="Run a study; writes DIR/STUDY.json ({study, config, rows}), DIR/STUDY.csv and DIR/STUDY.png "
                    "(xi-theorem41 has no figure).",
    )
    studies = exp.add_subparsers(dest="study", metavar="STUDY")
    registry = available_studies()
    for name, study in registry.items():
        _add_study(studies, name, study)
    if "audit" in registry:
        _add_study(sub, "audit", registry["audit"], command="audit", help_text=_AUDIT_HELP)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _Run:
    """The state of one :func:`main` call: the command's name (for messages), whether ``--strict`` turns its
    warnings into refusals, and its warnings not yet printed (``pending``; ``flushed`` once the command has
    started writing or running: then a warning is printed at once)."""

    command = "torchdpgmm"
    strict = False
    pending: list[str] = []
    flushed = False


def _warn(text: str, command: str | None = None) -> None:
    """A warning of the running command: one line on stderr, or under ``--strict`` a refusal (one line, exit
    status 2, nothing written: every warning comes before the command writes anything). Until the command writes
    or starts its run (:func:`_flush_warnings`) the line waits, so that a command refused after a warning prints
    its one line of error alone (``--epsilon 50`` warned "protects little", then was refused as void)."""
    name = command or _Run.command
    if _Run.strict:
        raise UsageError(f"{name}: error: {text} (--strict refuses a release with a warning; nothing was written)")
    _Run.pending.append(f"{name}: warning: {text}")
    if _Run.flushed:
        _flush_warnings()


def _flush_warnings() -> None:
    """Print the warnings waiting (:func:`_warn`): the command goes on to write or run, so they stand."""
    for line in _Run.pending:
        print(line, file=sys.stderr)
    _Run.pending, _Run.flushed = [], True


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    _warn(_one_line(Warning(message)))  # named by the running command, as docs/usage.md shows


_UNSET = object()


def _given_flags(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace) -> frozenset[str]:
    """The study's flags the user typed (an explicit flag beats ``--quick``, even when it equals the default):
    ``argv`` parsed again with every default of the study's parser set to a marker, then restored."""
    sub = parser
    for name in (args.command, args.study) if args.command == "experiment" else (args.command,):
        sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    saved = [(a, a.default) for a in sub._actions]
    try:
        for a, _ in saved:
            a.default = _UNSET
        again = parser.parse_args(argv)
    finally:
        for a, d in saved:
            a.default = d
    return frozenset(k for k, v in vars(again).items() if v is not _UNSET)


#: options whose value may start with "-" without being a plain number (``--bounds -500:500``), or be a negative
#: number argparse does not take for one (``--delta -1e-5``): joined to their flag, so the flag's own check answers
_DASH_VALUE_FLAGS = ("--bounds", "--epsilon", "--delta", "--seed", "--clip-bound", "--memory-budget")


def _join_dash_values(argv: list[str]) -> list[str]:
    """argparse takes a token that starts with "-" and is not a plain negative number (``-500:500``) for an
    option, so ``--bounds -500:500`` would fail with "expected one argument": such a value is joined to its
    flag (``--bounds=-500:500``), as the user meant."""
    import re

    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _DASH_VALUE_FLAGS and i + 1 < len(argv) and re.match(r"-(\d|\.\d|inf)", argv[i + 1], re.I):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input, 130 interrupted)."""
    command = "torchdpgmm"
    created: list[Path] = []
    _Run.command, _Run.strict, _Run.pending, _Run.flushed = command, False, [], False
    try:
        argv = _join_dash_values(list(sys.argv[1:] if argv is None else argv))
        parser = build_parser(studies=bool(argv) and argv[0] in _STUDY_COMMANDS)
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("torchdpgmm: error: choose a command: release, sample, synthesize, sweep, experiment, audit "
                             "(torchdpgmm --help)")
        command = f"torchdpgmm {args.command}"
        _Run.command, _Run.strict = command, bool(getattr(args, "strict", False))
        if getattr(args, "study", None) is not None:
            args.given = _given_flags(parser, argv, args)
        from torchdpgmm._validation import budget_scope

        # the budget's warnings once, at this front door; no Python-side allow_weak_privacy scope reaches a command
        with warnings.catch_warnings(), budget_scope(override=False):
            warnings.showwarning = _show_warning
            status = _dispatch(args, created)
        _flush_warnings()
        return status
    except KeyboardInterrupt:
        _flush_warnings()  # the command was running: its warnings stand
        hint = ""
        if command == "torchdpgmm sweep":
            hint = "; finished chunks are kept: re-run the same command with --resume to continue"
        print(f"{command}: interrupted{hint}", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, UsageError) and not isinstance(exc, _input_errors()):  # no torch import for usage
            raise
        _cleanup(created)
        msg = _one_line(exc)
        if isinstance(exc, OSError) and exc.filename is not None:  # not the raw errno text
            msg = f"cannot use {exc.filename}: {_path_reason(exc)}"
        if isinstance(exc, EOFError) or type(exc).__name__ in ("error", "BadGzipFile"):
            msg = "an input file is truncated or not a valid compressed file (download it again)"
        print(msg if msg.startswith("torchdpgmm") else f"{command}: error: {msg}", file=sys.stderr)
        return 2


_WRITE_REASONS = {
    "EACCES": "permission denied (is the folder writable?)", "EPERM": "permission denied (is the folder writable?)",
    "EROFS": "the file system is read-only", "ENOSPC": "the disk is full", "EDQUOT": "the disk quota is exceeded",
    "ENOENT": "its folder does not exist", "ENOTDIR": "a part of the path is a file, not a folder",
    "EISDIR": "it is a folder", "ENAMETOOLONG": "the name is too long", "EEXIST": "it already exists",
}


def _write_reason(exc: OSError) -> str:
    """A plain reason for a failed write: never the raw errno text or the temporary file's name."""
    import errno as _errno

    return _WRITE_REASONS.get(_errno.errorcode.get(exc.errno or -1, ""), "the operating system refused the write")


def _path_reason(exc: OSError) -> str:
    """:func:`_write_reason`, and for a folder that could not be made because a file has its name, that."""
    if isinstance(exc, FileExistsError) and Path(exc.filename).is_file():
        return "it is a file, not a folder"
    return _write_reason(exc)


class _writing:
    """``with _writing("sample", out): ...``: an OSError while writing becomes one line that names the user's
    ``--out`` path and a plain reason (the writers are atomic, so nothing half-written is left)."""

    def __init__(self, command: str, out: Path) -> None:
        self.command, self.out = command, out

    def __enter__(self) -> None:
        _flush_warnings()  # the command writes: its warnings stand, before anything is written
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if isinstance(exc, OSError):
            raise UsageError(f"torchdpgmm {self.command}: error: could not write {self.out}: {_write_reason(exc)}; "
                             "nothing was written") from None
        return False


def _input_errors() -> tuple[type[BaseException], ...]:
    """What a bad input can raise: reported in one line with exit status 2."""
    import numpy as np
    import torch

    import zipfile
    import zlib

    # EOFError / zlib.error: a truncated or corrupt compressed input (e.g. an IDX .gz cut short); BadZipFile: an NPZ
    # whose member fails its CRC check
    return (ValueError, TypeError, OSError, ArithmeticError, EOFError, zlib.error, zipfile.BadZipFile,
            np.linalg.LinAlgError, torch.linalg.LinAlgError)


def _cleanup(created: list[Path]) -> None:
    """Remove output folders that this (failed) command created: nothing half-made is left behind."""
    for path in created:
        shutil.rmtree(path, ignore_errors=True)


def _new_folder(path: Path, created: list[Path]) -> None:
    """Remember ``path`` (and its missing parents) for removal if the command fails; the command's run starts, so
    its warnings are printed now (a sweep or study may run for hours)."""
    _flush_warnings()
    path = Path(path)
    top = None
    while not path.exists():
        top = path
        if path.parent == path:
            break
        path = path.parent
    if top is not None:
        created.append(top)


def _dispatch(args: argparse.Namespace, created: list[Path]) -> int:
    if args.command in ("experiment", "audit"):
        return _cmd_study(args, created)
    if args.command == "release":
        return _cmd_release(args)
    if args.command == "sample":
        return _cmd_sample(args)
    if args.command == "synthesize":
        return _cmd_synthesize(args, created)
    return _cmd_sweep(args, created)


def check_device(device: str) -> str:
    """``device`` must name a torch device that exists here (``--device cuda`` needs a GPU)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise UsageError(f"--device {device!r} is not a torch device (use cpu or cuda)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA GPU is available on this machine; use --device cpu")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {device!r}: only cpu and cuda are supported")
    return device


def check_privacy_flags(args: argparse.Namespace, *, need_classes: bool) -> None:
    """The flag combinations of a release, checked before any data is read."""
    from torchdpgmm._validation import check_clip_bound

    if args.mode == "sound":
        if need_classes and args.classes is None:
            raise UsageError("sound mode needs the public class set: pass --classes a,b,c (every label value, "
                             "comma separated; it is never read from the data)")
        if args.clip_bound is None and not _has_bounds(args):
            raise UsageError("sound mode needs --clip-bound B (a public L2 bound on every record, chosen "
                             "without looking at the data; records are clipped to it)")
        if args.clip_bound is not None:
            check_clip_bound(args.clip_bound)
        bad = [m for m in _mechanisms(args) if m == "r1smg"]
        if bad:
            raise UsageError("--mechanism r1smg has no sound mode (it is not DP as calibrated; docs/privacy.md)")
        if getattr(args, "variant", None) is not None:
            raise UsageError("--variant applies to --mode as-published only")
        if args.adjacency is None:
            args.adjacency = "add-remove"
        return
    if _has_bounds(args):
        raise UsageError("--bounds and --schema apply to --mode sound only")
    if args.clip_bound is not None:
        raise UsageError("--clip-bound applies to --mode sound only (the as-published mechanism does not clip)")
    if args.adjacency is not None:
        raise UsageError("--adjacency applies to --mode sound only (as-published is label-flip only)")


def _warn_as_published(args: argparse.Namespace) -> None:
    """The as-published caveat, printed once every check has passed (for ``release``, once the release ran: its
    data checks come last), before anything is written."""
    if args.mode == "as-published":
        from torchdpgmm._validation import AS_PUBLISHED_WARNING  # not the estimators' module: no scikit-learn

        _warn(AS_PUBLISHED_WARNING)


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return list(getattr(args, "mechanisms", None) or [getattr(args, "mechanism", "")])


def _has_bounds(args: argparse.Namespace) -> bool:
    return getattr(args, "bounds", None) is not None or getattr(args, "schema", None) is not None


def _check_discrete_flag(args: argparse.Namespace, command: str) -> bool:
    """``--discrete`` needs public bounds (checked before any data are read); returns whether bounds are given."""
    if getattr(args, "discrete", None) is not None and not _has_bounds(args):
        raise UsageError(f"torchdpgmm {command}: error: --discrete needs public integer bounds: --bounds or --schema")
    return _has_bounds(args)


def _rows_in_units(bounds: Any, rows: Any) -> Any:
    """Synthetic rows of the centred unit box in the user's units: within the bounds, discrete columns rounded
    (:meth:`torchdpgmm.bounds.Bounds.clip_rows`; post-processing)."""
    import torch

    return torch.as_tensor(bounds.clip_rows(bounds.from_unit(rows + 0.5)))


def _read_bounds(args: argparse.Namespace, names: Sequence[str]):
    """The public bounds of ``--bounds`` / ``--schema`` for the used feature columns ``names`` (from the
    header, public), or None."""
    from torchdpgmm.bounds import Bounds, parse_bounds_text

    if args.bounds is not None and args.schema is not None:
        raise UsageError("give the bounds once: --bounds or --schema, not both")
    if args.bounds is not None:
        b = parse_bounds_text(args.bounds, names=list(names), n_features=len(names))
    elif args.schema is not None:
        b = Bounds.from_schema(args.schema, names=list(names))
    else:
        return None
    if getattr(args, "discrete", None) is None:
        return b
    from torchdpgmm.bounds import parse_discrete_text

    return b.discrete_columns(parse_discrete_text(args.discrete), list(names))


def _check_out_file(path: Path, force: bool = False, suffix: str | None = None) -> None:
    """The destination of an output file, checked before any data is read (public facts only); ``suffix``
    (``".json"``, ``".csv"``): the extension the file's format needs (a model file named ``o.csv`` would
    hold JSON)."""
    import os

    path = Path(path)
    if path.is_symlink():
        raise UsageError(f"--out {path} is a symbolic link; give a plain file name")
    if path.is_dir():
        raise UsageError(f"--out {path} is a folder; give a file name")
    if suffix is not None and path.suffix.lower() != suffix:
        what = {".json": "a JSON model file", ".csv": "a CSV file"}.get(suffix, f"a {suffix} file")
        raise UsageError(f"--out {path}: this command writes {what}; give a name ending in {suffix}")
    if path.exists() and not force:
        raise UsageError(f"--out {path} exists; pass --force to overwrite it")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageError(f"--out {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path}: the folder {parent} is not writable")


def _generator(seed: int | None):
    import torch

    g = torch.Generator()
    if seed is None:
        g.seed()
    else:
        g.manual_seed(seed)
    return g


_FIT_STREAM, _SAMPLE_STREAM = 0, 1  # torchdpgmm.privacy.record.FIT_STREAM / SAMPLE_STREAM (the estimators' too)


def _stream_generator(seed: int | None, stream: int):
    """Stream ``stream`` of ``seed`` (:func:`torchdpgmm.privacy.record.child_seed`, as the estimators derive theirs):
    the release's noise and the synthetic draws never share numbers; fresh OS entropy without a seed."""
    if seed is None:
        return _generator(None)
    from torchdpgmm.privacy.record import child_seed

    return _generator(child_seed(seed, stream))


def _refuse_weak_privacy(epsilon: Any, delta: Any) -> None:
    """The budget rule of every command (:func:`torchdpgmm._validation.check_privacy_strength`, the one rule of
    the estimators and ``release()`` too), before any data are read or any trial runs: a meaningless budget
    (epsilon > 1e3, delta >= 0.5; the largest of a list) is refused in one line, a weak one (epsilon > 10,
    delta > 1e-3) gives one warning line (a refusal under ``--strict``); the releases inside the command do not
    repeat it. The command line has no override (Python's ``allow_weak_privacy=True``), so the message does not
    offer one."""
    from torchdpgmm._validation import REFUSE_DELTA, REFUSE_EPSILON, WeakPrivacyWarning, check_privacy_strength

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_privacy_strength(epsilon, delta)
        except ValueError:
            raise UsageError(f"epsilon <= {REFUSE_EPSILON:g} and delta < {REFUSE_DELTA:g} are required for a "
                             "meaningful guarantee") from None
    for w in caught:
        if issubclass(w.category, WeakPrivacyWarning):
            _warn(str(w.message))


def _study_budget(options: dict[str, Any]) -> tuple[list[float], Any]:
    """The epsilons and delta a study's flags give (any of ``--epsilon``, ``--epsilons``, ``--density-epsilon``,
    ``--ic-epsilon``; a comma list or numbers), for :func:`_refuse_weak_privacy`."""
    eps: list[float] = []
    for key in ("epsilon", "epsilons", "density_epsilon", "ic_epsilon"):
        v = options.get(key)
        for item in (str(v).split(",") if isinstance(v, str) else v if isinstance(v, (list, tuple)) else [v]):
            try:
                eps.append(float(item))
            except (TypeError, ValueError):
                continue
    return eps, options.get("delta")


def _cmd_release(args: argparse.Namespace) -> int:
    import torch

    from torchdpgmm._validation import check_clip_bound, check_privacy_params
    from torchdpgmm.datafile import check_class_list, read_labeled_table
    from torchdpgmm.modelfile import model_to_dict, save_model

    check_privacy_params(args.epsilon, args.delta)
    _refuse_weak_privacy(args.epsilon, args.delta)
    check_privacy_flags(args, need_classes=True)
    if args.seed is not None and args.seed < 0:
        raise UsageError("--seed must be >= 0")
    if args.covariance_type not in ("full", "auto") and args.mode != "sound":
        raise UsageError("--covariance-type applies to --mode sound only")
    _check_discrete_flag(args, "release")
    if args.center is not None and (args.bounds is None and args.schema is None or args.mode != "sound"):
        raise UsageError("--center applies to --mode sound with --bounds or --schema only")
    if args.out is None and not args.check_settings:
        raise UsageError("torchdpgmm release: error: the following arguments are required: --out")
    if args.out is not None:
        _check_out_file(args.out, args.force, ".json")  # the destination before any data is read
    if args.strict and args.seed is not None:
        from torchdpgmm.privacy.record import SEEDED_NOISE_NOTE

        _warn(SEEDED_NOISE_NOTE)  # refused before any data are read
    sound = args.mode == "sound"
    classes = None if args.classes is None else check_class_list(args.classes)
    features = _release_features(args)
    table = read_labeled_table(args.data, args.label_column, features, classes=classes, private=sound)
    from torchdpgmm.release import release

    bounds = _read_bounds(args, table.feature_names)  # public: the bounds and the header's column names
    X = table.X
    kwargs: dict[str, Any] = {}
    if sound:
        d = X.shape[1]
        clip = args.clip_bound if args.clip_bound is not None else bounds.clip_bound_for(args.center)
        if bounds is not None:  # public: d and the centring; a bound that holds the whole box only adds noise
            bounds.check_clip_bound(clip, args.center)
        kwargs.update(clip_bound=check_clip_bound(clip, d), adjacency=args.adjacency)
        if bounds is not None:  # release in the unit box; mapped back below (exact, affine)
            X = bounds.to_unit(X)
        if args.covariance_type != "full":
            kwargs["covariance_type"] = args.covariance_type
    elif args.variant is not None:
        kwargs["variant"] = args.variant
    if args.check_settings:  # data-dependent by design: about the box's middle, or the data's own mean
        center = None if bounds is None else (
            bounds.unit_center if args.center == "box" else torch.as_tensor(X, dtype=torch.float64).nanmean(0))
        return _check_settings(args, table, X, kwargs["clip_bound"] if sound else None, center)
    g = _stream_generator(args.seed, _FIT_STREAM)
    if bounds is not None:
        from torchdpgmm.bounds import release_in_unit_box

        rel = release_in_unit_box(torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(table.y), table.num_classes,
                                  args.epsilon, args.delta, bounds, center=args.center, generator=g,
                                  mechanism=args.mechanism, **kwargs)
    else:
        rel = release(X, table.y, table.num_classes, args.epsilon, args.delta, mechanism=args.mechanism,
                      mode=args.mode, generator=g, **kwargs)
    _warn_as_published(args)  # once the release ran: an as-published input error is one line, without the caveat
    privacy, model = rel.privacy, rel.model
    if sound:  # public values: the discrete samplers' share of delta (one line; refused, nothing written, where void)
        from torchdpgmm._validation import check_sampler_delta

        check_sampler_delta(privacy.epsilon, privacy.delta, privacy.delta_sampler)
    if bounds is not None:
        model = bounds.model_from_unit(model)
    if args.seed is not None:
        from torchdpgmm.privacy.record import SEEDED_NOISE_NOTE, with_seeded_noise_note

        _warn(SEEDED_NOISE_NOTE)
        privacy = with_seeded_noise_note(privacy)
    model_to_dict(model, privacy, table.class_names, table.feature_names, bounds)  # validate before writing
    if sound:  # from released values and public scales only (post-processing); before anything is written
        from torchdpgmm.release.diagnostics import CLI_CAUSES, warn_sound_release

        B = float(kwargs["clip_bound"])  # the public box of the released means: the unit box, or [-B, B] about 0
        lo, hi = ([0.0] * d, [1.0] * d) if bounds is not None else ([-B] * d, [B] * d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_sound_release(rel, lo, hi, table.feature_names, causes=CLI_CAUSES)
        for w in caught:
            _warn(str(w.message))
    with _writing("release", args.out):
        save_model(args.out, model, privacy, table.class_names, table.feature_names, bounds)
    rec = privacy.to_dict()
    # the number of records is private under add/remove: only public facts are printed in sound mode
    size = "" if args.mode == "sound" else f", N={table.X.shape[0]}"
    print(f"wrote {args.out}: K={table.num_classes}, d={table.X.shape[1]}{size}, "
          f"epsilon={rec['epsilon']:g}, delta={rec['delta']:g}, mode={rec['mode']}, adjacency={rec['adjacency']}")
    return 0


def _schema_columns(args: argparse.Namespace) -> list[str] | None:
    """The columns that ``--bounds COL=LOW:HIGH,...`` or ``--schema`` name (public schema), or None."""
    from torchdpgmm.bounds import Bounds, parse_bounds_text

    if args.bounds is not None and "=" in args.bounds:
        return list(parse_bounds_text(args.bounds).names or [])
    if getattr(args, "schema", None) is not None and args.bounds is None:
        return list(Bounds.from_schema(args.schema).names or [])
    return None


def _release_features(args: argparse.Namespace) -> list[str] | None:
    """The feature columns of ``release``, from public schema only (before any data are read): ``--features``,
    else the columns ``--bounds`` / ``--schema`` name; a CSV with none of them is refused in one line (every
    other column would take text columns too, whose cells are dropped as not numbers). An NPZ's ``X`` is its
    feature table."""
    if args.features is not None:
        if args.label_column is not None and args.label_column in args.features:
            raise UsageError(f"--features names the label column {args.label_column!r}: a label cannot also be a "
                             "feature (list the other columns)")
        return list(args.features)
    named = _schema_columns(args)
    if named:
        if args.label_column is not None and args.label_column in named:
            raise UsageError(f"--bounds / --schema name the label column {args.label_column!r}: a label cannot also "
                             "be a feature")
        return named
    if Path(args.data).suffix.lower() != ".npz":
        raise UsageError("name the feature columns: --features COL,COL,... (or --bounds COL=LOW:HIGH,... / --schema, "
                         "whose columns are then the features); every other column is never taken by default")
    return None


def _check_settings(args: argparse.Namespace, table: Any, X: Any, clip_bound: float | None, center: Any) -> int:
    """``release --check-settings``: the separate, non-private settings check (nothing released or written).
    ``X`` is what the release would see (the unit box with --bounds), ``clip_bound`` and ``center`` in its units."""
    try:
        from torchdpgmm.release.evaluation import check_settings
    except ImportError:
        raise UsageError("--check-settings needs torchdpgmm.release.evaluation.check_settings, missing in this build") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # printed below, once each
        msgs = check_settings(X, table.y, num_classes=table.num_classes, epsilon=args.epsilon, delta=args.delta,
                              clip_bound=clip_bound, center=center)
    budget = len(_Run.pending)  # the budget rule's own warnings (public values), printed first
    _flush_warnings()
    for m in msgs:
        print(f"torchdpgmm release: settings warning (data dependent, do not publish): {m}", file=sys.stderr)
    print(f"settings checked: {budget + len(msgs)} warning(s) ({budget} on the budget alone, {len(msgs)} on the "
          "data); nothing released, nothing written")
    return 0


def _warn_mostly_noise(command: str, noisy: bool, reason: str | None = None) -> None:
    """After a release, from RELEASED values only (post-processing): the one-line warning of
    :mod:`torchdpgmm.release.diagnostics` when its verdict ``noisy`` says the release is mostly noise (``reason``:
    why, default the class counts)."""
    from torchdpgmm.release.diagnostics import CLI_CAUSES, warn_mostly_noise

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if noisy:
            warn_mostly_noise(CLI_CAUSES, reason=reason)
    for w in caught:
        _warn(str(w.message), f"torchdpgmm {command}")


def _whole_number_columns(bounds: Any) -> tuple[int, ...]:
    """The columns written as whole numbers (``3``, not ``3.0``): :attr:`torchdpgmm.bounds.Bounds.whole_number_columns`."""
    return () if bounds is None else bounds.whole_number_columns


def _cmd_sample(args: argparse.Namespace) -> int:
    from torchdpgmm.datafile import write_labeled_csv
    from torchdpgmm.mixture import histogram_counts
    from torchdpgmm.modelfile import MAX_SAMPLE_ROWS, load_model
    import torch

    if args.n < 1:
        raise UsageError("torchdpgmm sample: error: -n must be >= 1")
    if args.n > MAX_SAMPLE_ROWS:
        raise UsageError(f"torchdpgmm sample: error: -n must be <= {MAX_SAMPLE_ROWS:.0e} (the rows are drawn in "
                         "memory); write several files instead")
    if args.seed is not None and args.seed < 0:
        raise UsageError("torchdpgmm sample: error: --seed must be >= 0")
    _check_out_file(args.out, args.force, ".csv")
    mf = load_model(args.model)
    g = _stream_generator(args.seed, _SAMPLE_STREAM)  # never the stream of the release's noise
    model = mf.model
    counts = None if args.iid else histogram_counts(model.counts if model.counts is not None else model.weights, args.n)
    if mf.bounds is not None:  # the model restricted to the public bounds (never clipped onto them), user's units
        from torchdpgmm.bounds import truncated_sample

        x, y, fallback = truncated_sample(model, mf.bounds.lower, mf.bounds.upper, g, counts=counts, n=args.n)
        if fallback:
            _warn(f"{fallback} of {args.n} rows come from a class whose released Gaussian puts almost no mass inside "
                  "the bounds: drawn by Gibbs sweeps inside them (approximate)", "torchdpgmm sample")
        x = torch.as_tensor(mf.bounds.clip_rows(x))  # discrete columns rounded (one-hot: argmax); inside already
    elif counts is None:
        x, y = model.sample(args.n, g)
    else:
        x, y, _ = model.sample_counts(counts, g)
    with _writing("sample", args.out):
        write_labeled_csv(args.out, x, y, mf.class_names, mf.feature_names, args.label_column,
                          integer_columns=_whole_number_columns(mf.bounds))
    print(f"wrote {args.out}: {args.n} rows")
    return 0


def _check_synthesize_flags(args: argparse.Namespace) -> tuple[list[str], bool]:
    """``synthesize``'s public checks (flags, budget, destination), all before the data are read; returns the
    class list and whether public bounds were given."""
    from torchdpgmm._validation import check_privacy_params
    from torchdpgmm.datafile import check_class_list

    check_privacy_params(args.epsilon, args.delta)
    _refuse_weak_privacy(args.epsilon, args.delta)
    classes = check_class_list(args.classes)
    if args.n is not None and args.n < 1:
        raise UsageError("torchdpgmm synthesize: error: -n must be >= 1")
    from torchdpgmm.modelfile import MAX_SAMPLE_ROWS

    if args.n is not None and args.n > MAX_SAMPLE_ROWS:  # as `sample`: refused before the data are read
        raise UsageError(f"torchdpgmm synthesize: error: -n must be <= {MAX_SAMPLE_ROWS:.0e} (the rows are drawn in "
                         "memory); draw more from the release with DPSyntheticClassifier.sample in several calls")
    if args.components_per_class is not None and args.components_per_class < 1:
        raise UsageError("torchdpgmm synthesize: error: --components-per-class must be >= 1")
    if args.image_transform is None:  # a table (public bounds) takes the table defaults, as DPSyntheticClassifier
        args.image_transform = "none" if _has_bounds(args) else "dct14"
    width = args.n_components or (40 if args.image_transform == "dct14" else None)  # else: the header's width
    if args.components_per_class is not None and width is not None and args.components_per_class > 2 * width:
        raise UsageError(f"torchdpgmm synthesize: error: --components-per-class must be <= 2 x --n-components = "
                         f"{2 * width} (the initial centres lie along the top released directions)")
    if args.out.is_symlink() or (args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir()))):
        raise UsageError(f"torchdpgmm synthesize: error: --out {args.out} must be a new or empty folder")
    parent = next((p for p in args.out.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageError(f"torchdpgmm synthesize: error: --out {args.out}: {parent} is not a folder")
    if args.seed is not None and args.seed < 0:
        raise UsageError("torchdpgmm synthesize: error: --seed must be >= 0")
    has_bounds = _check_discrete_flag(args, "synthesize")
    if has_bounds and args.image_transform != "none":
        raise UsageError("torchdpgmm synthesize: error: --bounds / --schema need --image-transform none (a table)")
    if args.n_components is not None and args.n_components < 1:
        raise UsageError("torchdpgmm synthesize: error: --n-components must be >= 1")
    if args.image_transform == "dct14" and not 1 <= (args.n_components or 40) <= 196:  # public: before any read
        raise UsageError("torchdpgmm synthesize: error: --n-components must lie in [1, 196] (the 14x14 DCT's width)")
    for flag in ("mean_clip", "pca_clip", "radius"):
        v = getattr(args, flag)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise UsageError(f"torchdpgmm synthesize: error: --{flag.replace('_', '-')} must be a positive finite number")
    return classes, has_bounds


def _check_synthesize_width(args: argparse.Namespace, width: int | None) -> None:
    """The settings that the data's width (public schema; None: not known yet) makes impossible, naming the flag:
    dct14 needs 784 columns, --n-components at most the transformed width, --components-per-class at most twice the
    dimension (its default: 40 for dct14, the width for none)."""
    if width is None:
        return
    if args.image_transform == "dct14" and width != 784:
        raise UsageError("torchdpgmm synthesize: error: --image-transform dct14 needs 28x28 images (784 columns), "
                         f"the data have {width} columns")
    if args.image_transform == "none" and args.n_components is not None and args.n_components > width:
        raise UsageError(f"torchdpgmm synthesize: error: --n-components must lie in [1, {width}] (the data's "
                         f"{width} columns, with --image-transform none), got {args.n_components}")
    d = args.n_components or (width if args.image_transform == "none" else 40)
    if args.components_per_class is not None and args.components_per_class > 2 * d:
        raise UsageError(f"torchdpgmm synthesize: error: --components-per-class must be <= 2 x d = {2 * d} (d: "
                         "--n-components, by default 40 for dct14 and the data's width for none; the initial centres "
                         "lie along the top released directions)")


def _synthesize_rows(args: argparse.Namespace, rel: Any, bounds: Any) -> tuple[Any, Any]:
    """``synthesize -n``'s synthetic rows of the release ``rel`` (post-processing): from the released mixture, or with
    public ``bounds`` from it restricted to them (never clipped onto one), in the centred unit box."""
    m = rel.model
    try:
        if bounds is None:
            return m.sample(args.n, generator=_stream_generator(args.seed, 1))
        from torchdpgmm.bounds import pipeline_rows_in_box

        u, yk, fallback = pipeline_rows_in_box(m, rel.pca, float(rel.config.radius), args.n,
                                               _stream_generator(args.seed, 1))
        if fallback:
            _warn(f"{fallback} of {args.n} rows come from a component whose released Gaussian puts almost no "
                  "mass inside the bounds: drawn inside them approximately", "torchdpgmm synthesize")
        return u - 0.5, yk
    except (RuntimeError, MemoryError) as exc:
        raise UsageError(f"torchdpgmm synthesize: error: could not draw -n {args.n} synthetic rows "
                         f"({type(exc).__name__}; out of memory?)") from None


def _cmd_synthesize(args: argparse.Namespace, created: list[Path]) -> int:
    import json

    from torchdpgmm.datafile import feature_width, read_labeled_images, write_labeled_csv
    from torchdpgmm.modelfile import _umask, atomic_write_text
    from torchdpgmm.bounds import table_pipeline_clips
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    classes, has_bounds = _check_synthesize_flags(args)  # every public check before the data are read
    if args.strict and args.seed is not None:
        from torchdpgmm.privacy.record import SEEDED_NOISE_NOTE

        _warn(SEEDED_NOISE_NOTE)  # refused before any data are read
    named = _schema_columns(args) if has_bounds else None  # the columns the bounds name are the features
    if named and args.label_column is not None and args.label_column in named:
        raise UsageError(f"--bounds / --schema name the label column {args.label_column!r}: a label cannot also "
                         "be a feature")
    # the width is public schema: from the file's header, settings it makes impossible are refused before a record
    # is read (and again below with the table's width, for a header that did not say)
    _check_synthesize_width(args, feature_width(args.data, args.label_column, named or None))
    # uint8 pixels are scaled to [0, 1] as the IDX reader scales them, unless public bounds (the file's units) are given
    table = read_labeled_images(args.data, classes, args.label_column, named or None, uint8_pixels=not has_bounds)
    _check_synthesize_width(args, table.X.shape[1])
    X, bounds = table.X, None
    if has_bounds:  # public: the bounds and the header's column names; records into the centred unit box
        bounds = _read_bounds(args, getattr(table, "feature_names", None) or [f"x{i}" for i in range(X.shape[1])])
        X = bounds.to_unit(X) - 0.5
    dflt = table_pipeline_clips(bounds.dim) if bounds is not None else (14.0, 10.0, 5.0)
    mean_clip, pca_clip, radius = (v if v is not None else f for v, f in
                                   zip((args.mean_clip, args.pca_clip, args.radius), dflt))
    # the public rule of DPSyntheticClassifier: 40 DCT components of an image, every column of a table
    n_comp = args.n_components or (X.shape[1] if args.image_transform == "none" else 40)
    cfg = PipelineConfig(transform=args.image_transform, n_components=n_comp, mean_clip=mean_clip,
                         pca_clip=pca_clip, radius=radius, covariance_type=args.covariance_type,
                         class_rule=args.class_rule, components_per_class=args.components_per_class)
    rel = release_pipeline(X, table.y, num_classes=len(classes), epsilon=args.epsilon, delta=args.delta,
                           adjacency=args.adjacency, config=cfg, generator=_stream_generator(args.seed, 0))
    privacy = rel.privacy
    if args.seed is not None:
        from torchdpgmm.privacy.record import SEEDED_NOISE_NOTE, with_seeded_noise_note

        _warn(SEEDED_NOISE_NOTE)
        privacy = with_seeded_noise_note(privacy)
    m, d = rel.model, rel.pca.components.shape[0]
    payload = {"format": "torchdpgmm-synthetic-pipeline", "format_version": 1, "class_names": classes,
               "config": rel.config.to_dict(), "privacy": privacy.to_dict(),
               "bounds": None if bounds is None else bounds.to_dict(),
               "pca": {"mean": rel.pca.mean.tolist(), "components": rel.pca.components.tolist()},
               "mixture": {"weights": m.weights.tolist(), "comp_weights": m.comp_weights.tolist(),
                           "means": m.means.tolist(), "covariances": m.covariances.tolist()}}
    from torchdpgmm.release.diagnostics import pipeline_noise_reason

    reason = pipeline_noise_reason(rel)  # released values only; before any write
    _warn_mostly_noise("synthesize", reason is not None, reason)
    sample = None if args.n is None else _synthesize_rows(args, rel, bounds)  # drawn before anything is written
    # write into a fresh sibling folder, then rename it into place: the output appears whole or not at all
    import os
    import tempfile

    with _writing("synthesize", args.out):
        if not args.out.parent.exists():
            _new_folder(args.out.parent, created)
            args.out.parent.mkdir(parents=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{args.out.name}.", dir=args.out.parent))
        try:  # any failure or Ctrl-C while writing removes the temporary folder
            atomic_write_text(tmp / "release.json", json.dumps(payload, indent=1, default=float))
            if sample is not None:
                if bounds is None:
                    write_labeled_csv(tmp / "synthetic.csv", sample[0], sample[1], classes,
                                      [f"z{i}" for i in range(d)])
                else:  # rows inside the bounds back in the user's units and column names (post-processing)
                    rows = sample[0]
                    write_labeled_csv(tmp / "synthetic.csv", _rows_in_units(bounds, rows), sample[1], classes,
                                      list(bounds.names or [f"x{i}" for i in range(rows.shape[1])]),
                                      integer_columns=_whole_number_columns(bounds))
            tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; give it an ordinary new folder's permissions
            os.replace(tmp, args.out)  # onto a missing or empty folder
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    created.clear()
    rec = privacy.to_dict()
    print(f"wrote {args.out}: K={len(classes)}, d={d}, {rel.config.components_per_class} component(s) per class, "
          f"epsilon={rec['epsilon']:g}, delta={rec['delta']:g}, adjacency={rec['adjacency']}"
          + ("" if args.n is None else f", {args.n} synthetic rows"))
    return 0


def _sweep_spec(args: argparse.Namespace):
    """The SweepSpec of the flags; sound-mode fields are passed where this build's SweepSpec has them."""
    import dataclasses

    from torchdpgmm.sweep import SweepSpec

    unknown = sorted(set(args.mechanisms) - set(MECHANISMS))
    if unknown:
        raise UsageError(f"--mechanisms: unknown {', '.join(unknown)} (choose from {', '.join(MECHANISMS)})")
    if args.mode == "sound" and args.clip_bound is None:
        raise UsageError("sound mode (the default) needs --clip-bound B, a public L2 bound on every synthetic "
                         "record; the paper's label-level mechanisms (not record-level DP) are --mode as-published")
    check_privacy_flags(args, need_classes=False)
    _refuse_weak_privacy(list(args.epsilons), args.delta)  # before any chunk runs
    check_device(args.device)
    fields = {f.name for f in dataclasses.fields(SweepSpec)}
    kw: dict[str, Any] = dict(mechanisms=args.mechanisms, epsilons=args.epsilons, Ns=args.Ns, Ks=args.Ks,
                              ds=args.ds, trials=args.trials, chunk_size=args.chunk_size, seed=args.seed,
                              delta=args.delta, mode=args.mode, device=args.device)
    if args.results_format != "csv":
        kw["results_format"] = args.results_format
    if args.variant is not None:
        kw["variant"] = args.variant
    extra = {"clip_bound": args.clip_bound, "adjacency": args.adjacency, "classes": args.classes,
             "block_size": args.block_size, "memory_budget": args.memory_budget}
    for name, value in extra.items():
        if value is None:
            continue
        if name not in fields:
            raise UsageError(f"this build's sweep cannot pass --{name.replace('_', '-')} to its releases "
                             "(SweepSpec has no such field), so it cannot run this sound-mode sweep")
        kw[name] = value
    if args.block_size is not None and args.block_size < 1:
        raise UsageError(f"--block-size must be >= 1, got {args.block_size}")
    spec = SweepSpec(**kw)
    spec.validate()
    return spec


def _cmd_sweep(args: argparse.Namespace, created: list[Path]) -> int:
    from torchdpgmm._validation import MAX_SEED
    from torchdpgmm.sweep import run_sweep

    if args.seed < 0:  # as every other command: a seed is a non-negative integer
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.seed >= MAX_SEED:
        raise UsageError(f"--seed must be < 2^63, got {args.seed}")
    spec = _sweep_spec(args)
    _warn_as_published(args)
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}")
    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.workers > 1 and args.backend != "local":
        raise UsageError("--workers applies to --backend local (Ray schedules its own workers)")
    import torch

    torch.set_num_threads(args.threads)
    if not args.resume:
        _new_folder(args.out, created)
    _flush_warnings()  # the run starts (a resumed one too): its warnings now, not after hours
    try:
        res = run_sweep(spec, args.out, backend=args.backend, resume=args.resume, ray_address=args.ray_address,
                        progress=not args.no_progress and sys.stderr.isatty(),  # a log file gets no bar
                        workers=args.workers, threads=args.threads)
    except Exception:
        from torchdpgmm.sweep import _has_chunk_files

        if _has_chunk_files(args.out):  # finished chunks are kept for --resume, as the message says
            created.clear()
        raise
    created.clear()
    blocks = ", ".join(sorted({str(b) for b in res.get("block_sizes", {}).values()}))
    print(f"sweep in {args.out}: {res['done']} chunks run, {res['skipped']} already done, blocks of {blocks} trials; "
          f"rows in {res['results']}")
    return 0


def _cmd_study(args: argparse.Namespace, created: list[Path]) -> int:
    from torchdpgmm.experiments import ExperimentConfig, available_studies, run_study

    if getattr(args, "study", None) is None:
        raise UsageError("torchdpgmm experiment: error: choose a study: "
                         f"{', '.join(available_studies())} (torchdpgmm experiment --help)")
    check_device(args.device)
    from torchdpgmm._validation import MAX_SEED

    if args.seed < 0:
        raise UsageError(f"torchdpgmm {args.command}: error: --seed must be >= 0, got {args.seed}")
    if args.seed >= MAX_SEED:
        raise UsageError(f"torchdpgmm {args.command}: error: --seed must be < 2^63, got {args.seed}")
    if args.backend != "local":  # no study schedules its trials on Ray: refused, never run locally in silence
        raise UsageError(f"torchdpgmm {args.command}: error: --backend {args.backend} is not supported by the studies "
                         "(they run in this process); torchdpgmm sweep --backend ray runs a sweep's chunks on Ray")
    if args.trials is not None and args.trials < 1:
        raise UsageError(f"--trials must be >= 1, got {args.trials}")
    common = {"out", "trials", "seed", "device", "backend", "quick", "command", "study", "given"}
    options = {k: v for k, v in vars(args).items() if k not in common}
    _check_study_options(options, args.study)
    _refuse_weak_privacy(*_study_budget(options))  # before any trial runs
    cfg = ExperimentConfig(out=args.out, trials=args.trials, seed=args.seed, device=args.device,
                           backend=args.backend, quick=args.quick, options=options, given=getattr(args, "given", None))
    _new_folder(args.out, created)
    payload = run_study(args.study, cfg)
    created.clear()
    print(f"wrote {args.out / (args.study + '.json')} ({len(payload['rows'])} rows, "
          f"{payload['runtime_seconds']:.1f} s)")
    return 0


def _check_study_options(options: dict[str, Any], study: str | None = None) -> None:
    """Public options shared by several studies, checked before a study runs (one line, exit 2): a clip bound
    must be a positive finite number, an epsilon list comma-separated positive numbers without repeats, a delta
    in (0, 1), and a count of draws at least 1 (at least 4 for the audit study: audit() splits each dataset's
    draws into selection and evaluation)."""
    from torchdpgmm._validation import check_clip_bound

    least_draws = 4 if study == "audit" else 1
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "delta" and value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)
                                                         and 0 < value < 1):
            raise UsageError(f"{flag} must lie in (0, 1), got {value}")
        if key == "clip_bound" and value is not None:
            try:
                check_clip_bound(value)
            except (TypeError, ValueError):
                raise UsageError(f"{flag} must be a positive finite number") from None
        if key == "epsilons" and value is not None:
            try:
                vals = [float(v) for v in str(value).split(",") if v.strip()] if isinstance(value, str) else \
                    [float(v) for v in value]
            except ValueError:
                raise UsageError(f"{flag} must be comma-separated numbers") from None
            if not vals or not all(math.isfinite(v) and v > 0 for v in vals):
                raise UsageError(f"{flag} must be comma-separated positive numbers")
            if len(set(vals)) != len(vals):
                raise UsageError(f"{flag} must not repeat a value")
        if key.endswith("draws") and isinstance(value, int) and not isinstance(value, bool) and value < least_draws:
            raise UsageError(f"{flag} must be >= {least_draws}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
