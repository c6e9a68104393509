"""Structure rules of the code base (issue #12), checked on the source text.

* no function or method in ``torchdpgmm/`` is longer than 100 lines;
* nothing in the package, its docs or the README points outside the repository (the old design notes,
  ``../shared``) or names a source paper by a file number instead of its authors and year;
* the analytic-Gaussian solver and the Laplace sampler have one home each.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torchdpgmm"


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_function_longer_than_100_lines():
    long = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 100:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "functions longer than 100 lines:\n" + "\n".join(long)


_OUTSIDE = re.compile(r"DESIGN\.md|\.\./shared|\bpapers?\s+00\d")


def test_nothing_points_outside_the_repository():
    files = [p for p in PACKAGE.rglob("*") if p.suffix in {".py", ".md", ".txt"}]
    files += sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    hits = []
    for path in files:
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:90]}")
    assert not hits, "references outside the repository:\n" + "\n".join(hits)


def test_one_home_for_the_analytic_gaussian_solver_and_the_laplace_sampler():
    # Solvers of the analytic Gaussian calibration use brentq/bisection on Phi(...) - e^eps Phi(...);
    # Laplace samplers use log1p of uniforms. Outside their homes neither pattern may appear.
    homes = {PACKAGE / "privacy" / "calibration.py", *(PACKAGE / "mechanisms").rglob("*.py")}
    offenders = []
    for path in _python_files():
        if path in homes:
            continue
        text = path.read_text()
        if re.search(r"def\s+\w*(laplace\w*noise|laplace_vec|analytic\w*sigma\w*|gdp_mu)\s*\(", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, "samplers or solvers defined outside the noise layer / privacy package: " + ", ".join(offenders)
