"""Command-line checks shared by the benchmarks and scripts: a bad argument is one line on stderr naming the flag
(argparse's ``error``: exit status 2), before any work starts and before anything is written.

Benchmarks and scripts import it by path (they are not a package, and an unrelated ``benchmarks`` package may be
installed)::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import _args  # noqa: E402

* argparse ``type=`` functions: :func:`whole` (``whole(1)`` a count, ``whole(0)`` a count where 0 skips),
  :func:`positive_float`, and :func:`csv_of` for a comma-separated flag (it checks the text and returns it
  unchanged, so what a script parses and records stays the same);
* checks after ``parse_args``: :func:`check_quick_out` (``--quick`` needs ``--out``), :func:`check_out` (the output
  file or folder can be made: nothing is created),
  :func:`check_in` (an input file or folder exists), :func:`check_device` (``cuda`` needs a GPU here),
  :func:`check_git_ref` and :func:`check_names` (names against the valid ones, listed in the message);
* ``--jobs J`` of the benchmarks whose legs are fresh processes: :func:`run_legs` runs them J at a time.

Only the standard library at import; ``check_device`` imports torch (and torchdpgmm's own device check).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def whole(lo: int = 1) -> Callable[[str], int]:
    """argparse type: a whole number >= ``lo`` (``whole(1)``: a count; ``whole(0)``: 0 allowed, e.g. "0 skips")."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {lo}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {lo}, got {value}")
        return value
    parse.__name__ = f"whole_number_at_least_{lo}"
    return parse


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def csv_of(kind: Callable[[str], object], what: str, *, allow_empty: bool = False) -> Callable[[str], str]:
    """argparse type: a non-empty comma-separated list whose every item ``kind`` accepts (``kind`` raises
    ValueError or ArgumentTypeError otherwise; ``what`` says what an item must be). Returns the text unchanged.
    ``allow_empty``: empty items (and an empty list) are let through, for scripts that skip them."""
    def parse(text: str) -> str:
        items = [t.strip() for t in text.split(",")]
        if allow_empty:
            items = [t for t in items if t]
        elif not text.strip() or not all(items):
            raise argparse.ArgumentTypeError(f"must be comma-separated {what}, got {text!r}")
        for item in items:
            try:
                kind(item)
            except (ValueError, argparse.ArgumentTypeError):
                where = "" if item == text.strip() else f" in {text!r}"
                raise argparse.ArgumentTypeError(f"must be comma-separated {what}, got {item!r}{where}") from None
        return text
    parse.__name__ = "comma_separated_list"
    return parse


def check_names(ap: argparse.ArgumentParser, flag: str, names: Iterable[str], valid: Iterable[str]) -> None:
    """Every one of ``names`` is one of ``valid`` (the message lists them)."""
    valid = list(valid)
    bad = [n for n in names if n not in valid]
    if bad:
        ap.error(f"{flag}: unknown name{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}; "
                 f"choose from {', '.join(valid)}")


def check_quick_out(ap: argparse.ArgumentParser, quick: bool, out: str | os.PathLike | None) -> None:
    """``--quick`` writes only where ``--out`` points: a smoke run never replaces the committed results at the
    parser's default ``--out`` (or, where that default is None, runs without one)."""
    default = ap.get_default("out")
    if quick and (out is None or (default is not None and Path(out).resolve() == Path(default).resolve())):
        ap.error("--quick needs --out PATH (a smoke run never replaces the committed results)")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_out(ap: argparse.ArgumentParser, path: str | os.PathLike, flag: str = "--out", *,
              folder: bool = False) -> None:
    """``path`` (a file, or with ``folder=True`` a folder) can be written: not a folder (a file), its nearest
    existing ancestor a folder in which this process can create entries (probed with a temporary folder, removed
    at once, since a permission check alone passes for root on /proc). Nothing is left behind."""
    given = Path(path)
    p = given.absolute()
    if folder and p.exists() and not p.is_dir():
        ap.error(f"{flag} {given}: it is a file, not a folder")
    if not folder and p.is_dir():
        ap.error(f"{flag} {given}: it is a folder; give a file name")
    if not folder and p.exists() and not os.access(p, os.W_OK):
        ap.error(f"{flag} {given}: the file is not writable")
    anc = _nearest_existing(p if folder else p.parent)
    if not anc.is_dir():
        ap.error(f"{flag} {given}: {anc} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=anc))
    except OSError as e:
        ap.error(f"{flag} {given}: cannot write in {anc} ({e.strerror or e})")


def check_in(ap: argparse.ArgumentParser, path: str | os.PathLike | None, flag: str, *, folder: bool = False) -> None:
    """An input ``path`` (None: not given) exists and is a file (or with ``folder=True`` a folder)."""
    if path is None:
        return
    p = Path(path)
    if not p.exists():
        ap.error(f"{flag} {p}: no such {'folder' if folder else 'file'}")
    if folder and not p.is_dir():
        ap.error(f"{flag} {p}: not a folder")
    if not folder and not p.is_file():
        ap.error(f"{flag} {p}: not a file")


def check_device(ap: argparse.ArgumentParser, device: str, flag: str = "--device") -> None:
    """``device`` is cpu or cuda[:N], and cuda[:N] only where torch sees that GPU (torchdpgmm's ``--device`` check)."""
    from torchdpgmm.cli import UsageError
    from torchdpgmm.cli import check_device as _check

    try:
        _check(device)
    except UsageError as e:
        ap.error(str(e) if flag == "--device" else f"{flag}: {e}")


def check_git_ref(ap: argparse.ArgumentParser, flag: str, ref: str) -> None:
    """``ref`` names a commit of this repository (``git rev-parse --verify``)."""
    try:
        ok = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                            capture_output=True).returncode == 0
    except OSError as e:
        ap.error(f"{flag} {ref}: git could not be run ({e.strerror or e})")
    if not ok:
        ap.error(f"{flag} {ref!r} is not a commit of this repository")


def run_legs(legs: list[Callable[[], object]], jobs: int) -> list:
    """Call each of ``legs`` (functions of no argument, each running and timing a fresh process): in order, one
    after the other when ``jobs`` is 1 (a benchmark's measurement: each leg alone on the machine), else ``jobs`` at a
    time (a smoke run: threads waiting on the processes, whose timings then share the cores). Their results, in
    order."""
    if jobs == 1:
        return [leg() for leg in legs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(lambda leg: leg(), legs))
