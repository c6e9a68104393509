"""Docs that cannot go stale: every result number quoted in README.md and docs/*.md must appear, at the
precision quoted, in a JSON file under one of the repository's results folders (written by a committed
script or study).

Which numbers count as *quoted results* (the rule, so that it can be checked by eye):

* decimals (``45.2``, ``0.0388``, ``2.21e-10``), numbers with thousands separators (``1,788``),
  percentages (``24%``, ``12.5%``) and ratios (``223x``, ``1,294x``, ``78.4x``);
* NOT counted: plain integers without separators (equation, section, figure and table numbers, years,
  dimensions, class counts, trial counts are all small integers or settings), scientific numbers with an
  integer mantissa (``1e-5``: parameters such as delta), version strings (``2.14.1``), anything in fenced
  code blocks or inline code (commands and their parameters), link targets, numbers that follow a
  reference word (``Sec.``, ``eq.``, ``Fig``, ``Table``, ``Theorem``, ``Lemma``, ``Algorithm``,
  ``Appendix``, ``Cor.``, ``Prop.``, ``Def.``), and confidence levels (``95% CI``, ``95% interval``).

Where to look. A page's sources are the JSON files under the results folders that the page itself cites:
a path or folder mentioned anywhere in the page (``docs/results/audit.json``, ``benchmarks/results/``,
``scripts/results/synthetic/fig``, relative links included) covers every JSON file whose path starts with
it. Matching against *every* JSON of the repository would be too weak: with some 30,000 stored numbers,
almost any 3-decimal number in [0, 1] occurs somewhere by chance. A page that cites no JSON has no
sources, so every number it quotes is reported.

A quoted number ``x`` with ``k`` decimals (or ``k`` significant mantissa decimals in scientific notation)
matches a JSON value ``v`` when ``|abs(v) - abs(x)| <= 0.5 * 10^-k`` (rounding to the quoted precision;
the sign is ignored); a percentage also matches ``100 v``. Numbers inside JSON strings (e.g. a privacy
record's notes) count.
"""
from __future__ import annotations

import bisect
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT_DIRS = ["docs/results", "docs/realdata_results", "benchmarks/results", "scripts/results"]
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
OWNED_HERE = {"README.md", "docs/usage.md"}  # the pages of the front-door work; the others have their owners

_REF_WORDS = r"(?:sec|secs|section|sections|eq|eqs|equation|equations|fig|figs|figure|figures|table|tables|" \
             r"theorem|thm|lemma|lemmas|algorithm|alg|appendix|cor|corollary|prop|proposition|def|definition|step)"
_NUMBER = re.compile(
    r"(?<![\w.\-/])"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:[eE][+-]?\d+)?|\d+)"
    r"(?P<suffix>%|x(?![\w]))?"
    r"(?!\d|[\w.]\d|\.\d|,\d{3})"
)
_IN_TEXT = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_REF_BEFORE = re.compile(rf"\b{_REF_WORDS}\.?\s*\(?$", re.IGNORECASE)
_CONFIDENCE_AFTER = re.compile(r"^\s*(?:CI|confidence|interval|t-interval|level|bootstrap)", re.IGNORECASE)


def _strip_markdown(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)        # fenced code
    text = re.sub(r"`[^`\n]*`", " ", text)                          # inline code
    text = re.sub(r"\]\([^)]*\)", "]", text)                        # link targets
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)        # comments
    return text


def quoted_numbers(text: str) -> list[tuple[str, float, float, bool]]:
    """``(token, value, tolerance, is_percent)`` for every quoted result number of a markdown page."""
    out = []
    text = _strip_markdown(text)
    for m in _NUMBER.finditer(text):
        token, suffix = m.group("num"), m.group("suffix") or ""
        before, after = text[max(0, m.start() - 24):m.start()], text[m.end():m.end() + 24]
        if _REF_BEFORE.search(before):
            continue
        plain_int = re.fullmatch(r"\d+", token) is not None
        if plain_int and suffix == "":
            continue  # small integers: settings, counts, section numbers (module docstring)
        if suffix == "%" and _CONFIDENCE_AFTER.match(after):
            continue
        if re.match(r"^\.\d", after):  # version strings such as 2.14.1
            continue
        mant, _, exp = token.replace(",", "").lower().partition("e")
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        scale = 10.0 ** (int(exp) if exp else 0)
        value = float(mant) * scale
        tol = 0.5 * 10.0 ** (-decimals) * scale * (1 + 1e-9)
        out.append((token + suffix, value, tol, suffix == "%"))
    return out


def _json_numbers(obj, acc: list[float]) -> None:
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            acc.append(abs(float(obj)))
    elif isinstance(obj, str):  # a number, or a text holding numbers (e.g. a record's notes)
        for tok in _IN_TEXT.findall(obj):
            v = float(tok)
            if math.isfinite(v):
                acc.append(abs(v))
    elif isinstance(obj, dict):
        for v in obj.values():
            _json_numbers(v, acc)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _json_numbers(v, acc)


def result_files() -> list[Path]:
    return [p for d in RESULT_DIRS for p in sorted((ROOT / d).rglob("*.json"))]


def page_sources(page: str) -> list[Path]:
    """The result JSON files a page cites (module docstring)."""
    text = (ROOT / page).read_text()
    prefixes = set()
    for token in re.findall(r"[\w./-]*results/[\w./-]*", text):
        token = token.rstrip(".,;:)")
        for base in (ROOT / page).parent, ROOT:
            cand = (base / token).resolve()
            if str(cand).startswith(str(ROOT)):
                prefixes.add(str(cand))
    return [p for p in result_files() if any(str(p).startswith(pre) for pre in prefixes)]


def _values(files: list[Path]) -> list[float]:
    acc: list[float] = []
    for p in files:
        _json_numbers(json.loads(p.read_text()), acc)
    return sorted(acc)


def _present(values: list[float], x: float, tol: float) -> bool:
    i = bisect.bisect_left(values, abs(x) - tol)
    return i < len(values) and values[i] <= abs(x) + tol


def violations(page: str) -> list[str]:
    values = _values(page_sources(page))
    bad = []
    for token, x, tol, pct in quoted_numbers((ROOT / page).read_text()):
        if _present(values, x, tol) or (pct and _present(values, x / 100, tol / 100)):
            continue
        bad.append(token)
    return bad


# ---------------------------------------------------------------------------------------- the extractor
def test_extractor_rule():
    text = ("Sec. 4.2 and eq. (28) and Figure 3; 1,294x batched vs 78.4x, 24% of counts, a 95% CI, "
            "kl 45.2 < laplace 1,788, delta 1e-5, torch 2.14.1, d=3, N=1000, `--clip-bound 10.5`, "
            "diff 2.21e-10, [link](docs/x1.5.md)\n```bash\nrun --eps 0.75\n```\n")
    got = [t for t, *_ in quoted_numbers(text)]
    assert got == ["1,294x", "78.4x", "24%", "45.2", "1,788", "2.21e-10"]


def test_sources_are_the_cited_files():
    assert ROOT / "benchmarks/results/bench_sdp.json" in page_sources("docs/design.md")
    assert all("benchmarks/results" in str(p) for p in page_sources("README.md"))


def test_precision_matching():
    values = sorted([1293.7, 0.2404, 45.24, 2.2149e-10])
    for token, x, tol, pct in quoted_numbers("1,294x and 24% and 45.2 and 2.21e-10"):
        assert _present(values, x, tol) or (pct and _present(values, x / 100, tol / 100)), token
    for token, x, tol, pct in quoted_numbers("1,296x and 25% and 45.3 and 2.22e-10"):
        assert not (_present(values, x, tol) or (pct and _present(values, x / 100, tol / 100))), token


# ---------------------------------------------------------------------------------------- the pages
@pytest.mark.parametrize("page", PAGES)
def test_every_quoted_number_is_in_a_results_json(page):
    bad = violations(page)
    assert not bad, (f"{page}: {len(bad)} quoted number(s) appear in no JSON under {', '.join(RESULT_DIRS)} at "
                     f"the precision quoted: {', '.join(bad)}")
