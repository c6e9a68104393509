"""Structure rules of the code base (issue #12), checked on the source text.

* no function or method in ``torchdpgmm/`` is longer than 100 lines;
* nothing in the package, its docs or the README points outside the repository (the old design notes,
  ``../shared``) or names a source paper by a file number instead of its authors and year;
* the analytic-Gaussian solver and the Laplace sampler have one home each;
* the package layout is the layer table of docs/architecture.md, with no compatibility shims (issue #28).
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


def _architecture_paths() -> list[str]:
    """The paths named in the modules column of docs/architecture.md's layer table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    header, *rows = [r for r in rows if r.count("|") >= 4]
    assert "modules" in header, header
    return [p for r in rows for p in re.findall(r"`([^`]+)`", r.split("|")[2])]


def test_layout_matches_the_architecture_table():
    paths = _architecture_paths()
    assert paths, "docs/architecture.md has no layer table"
    missing = [p for p in paths if not (PACKAGE / p / "__init__.py" if p.endswith("/") else PACKAGE / p).is_file()]
    assert not missing, "named in docs/architecture.md but not in torchdpgmm/: " + ", ".join(missing)
    named_top = {p.split("/")[0] + ("/" if "/" in p else "") for p in paths}
    actual_top = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    actual_top |= {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert actual_top == named_top, ("top level of torchdpgmm/ differs from docs/architecture.md: "
                                     f"not in the table {sorted(actual_top - named_top)}, "
                                     f"not in the package {sorted(named_top - actual_top)}")
    # a folder whose modules the table lists has no module the table leaves out
    listed = {p.rsplit("/", 1)[0] for p in paths if p.endswith(".py") and "/" in p}
    unnamed = [f"{d}/{m.name}" for d in sorted(listed) for m in sorted((PACKAGE / d).glob("*.py"))
               if m.name != "__init__.py" and f"{d}/{m.name}" not in paths]
    assert not unnamed, "modules missing from docs/architecture.md: " + ", ".join(unnamed)


def test_no_compatibility_shims():
    # a module (not a package's __init__) that only imports and re-exports is a second home for names
    shims = []
    for path in _python_files():
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text()).body
        if all(isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               or (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])
               for n in body):
            shims.append(str(path.relative_to(ROOT)))
    assert not shims, "modules that only re-export others: " + ", ".join(shims)
