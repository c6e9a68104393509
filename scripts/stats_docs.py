"""Generate the result tables of docs/bayes.md (study ``xi-parkinson``) and docs/em.md (studies ``ais`` and
``em-synthetic``, benchmark ``bench_em``) from their JSON files, between ``<!-- BEGIN GENERATED: NAME -->`` and
``<!-- END GENERATED: NAME -->`` markers. Every number in those blocks comes from the JSON.

    python scripts/stats_docs.py --write      # rewrite the blocks
    python scripts/stats_docs.py --check      # exit 1 if a block differs from what the JSON gives
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARKINSON_JSON = ROOT / "docs" / "results" / "xi" / "xi-parkinson.json"
EM_JSONS = [ROOT / "docs" / "results" / "em" / "ais.json", ROOT / "docs" / "results" / "em" / "em-synthetic.json"]
BENCH_JSON = ROOT / "benchmarks" / "results" / "bench_em.json"
PK_METHODS = ["xi2011-laplace", "xi2011-laplace-common-box", "xi2011-laplace-public-box", "sound-gaussian",
              "sound-gaussian-oracle-box", "nonprivate"]
EM_METHODS = ["DP-MSNM", "DPGMM", "DP-EM (LLG)", "SAGMM"]


def _ci(r: dict) -> str:
    return f"{r['bayes_error']:.4f} [{r['bayes_error_ci_low']:.4f}, {r['bayes_error_ci_high']:.4f}]"


def _pk_panel(rows: list[dict], panel: str, key: str) -> list[str]:
    rr = [r for r in rows if r["panel"] == panel]
    head = "| " + key + " | " + " | ".join(PK_METHODS) + " |"
    out = [head, "| " + " | ".join(["---"] * (len(PK_METHODS) + 1)) + " |"]
    for v in sorted({r[key] for r in rr}):
        cells = []
        for m in PK_METHODS:
            r = next(r for r in rr if r[key] == v and r["method"] == m)
            cells.append(_ci(r))
        out.append(f"| {v:g} | " + " | ".join(cells) + " |")
    return out


def parkinson_block(payload: dict) -> str:
    rows, cfg = payload["rows"], payload["config"]
    size = [r for r in rows if r["panel"] == "size"]
    xi = [r for r in size if r["method"] == "xi2011-laplace"]
    com = [r for r in size if r["method"] == "xi2011-laplace-common-box"]
    flips = sum(r["share_above_half"] * r["trials"] for r in xi)
    flips_c = sum(r["share_above_half"] * r["trials"] for r in com)
    total = sum(r["trials"] for r in xi)
    nonpriv = max(r["bayes_error"] for r in size if r["method"] == "nonprivate")
    lines = [
        f"Seed {cfg['seed']}, {cfg['trials']} trials per point, {cfg['num_test']:,} test points per trial, "
        f"delta = {cfg['delta']:g} for the sound rows. Mean Bayes error with its 95% interval.",
        "",
        f"**Training-set size, epsilon = {cfg['epsilon']:g}** (the paper's Figures 2-5 sizes):",
        "",
        *_pk_panel(rows, "size", "n"),
        "",
        f"**Epsilon grid, n = {cfg['grid_n']}:**",
        "",
        *_pk_panel(rows, "epsilon", "epsilon"),
        "",
        "- Condition numbers of the class covariances (healthy, Parkinson's): "
        + ", ".join(f"{c:.1e}" for c in cfg["class_condition_numbers"]) + "; in standardised coordinates: "
        + ", ".join(f"{c:.1e}" for c in cfg["standardised_condition_numbers"]) + ".",
        f"- Majority-class error (reference line): {size[0]['majority_error']:.4f}; error of the true model's own "
        f"rule: {size[0]['optimal_error']:.5f}.",
        f"- Paper: DP error about {cfg['paper_dp_error']:g} at every size, majority-class error "
        f"{cfg['paper_majority_error']:g}, non-private error below {cfg['paper_nonprivate_below']:g}.",
        f"- Non-private plug-in, largest mean over the sizes: {nonpriv:.4f}.",
        f"- `xi2011-laplace` (per-class boxes): {flips:.0f} of {total} trials at epsilon = {cfg['epsilon']:g} "
        f"err above 0.5; with one common box (`xi2011-laplace-common-box`): {flips_c:.0f} of {total}.",
        f"- Public box over data-derived box, geometric mean of the per-feature width ratios: "
        f"{cfg['public_over_oracle_width_geomean']:.2f}.",
        "",
        "Public box (fixed in code, with its reason) and its width over the data-derived box's (the factor by "
        "which the noise on that feature's released mean changes; below 1 the public box is narrower and clips "
        "simulated values):",
        "",
        "| feature | low | high | reason | width ratio |",
        "| --- | --- | --- | --- | --- |",
        *[f"| {f} | {lo:g} | {hi:g} | {why} | {cfg['public_over_oracle_width'][f]:.2f} |"
          for f, (lo, hi, why) in cfg["public_box"].items()],
    ]
    return "\n".join(lines)


def _em_value(rows, ds, method, eps) -> str:
    r = next((r for r in rows if r["dataset"] == ds and r["method"] == method and r["kind"] == "loglik_vs_epsilon"
              and (r["epsilon"] == eps or (eps == "inf" and r["epsilon"] in ("inf", math.inf)))), None)
    if r is None:
        return ""
    v = r["median"]
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.2e}"


def em_block(payloads: list[dict]) -> str:
    out = ["Held-out log-likelihood mean (scaled units), median over trials; fits on the training rows of each "
           "trial, evaluation on its held-out rows.", ""]
    for p in payloads:
        rows, cfg = p["rows"], p["config"]
        for ds in dict.fromkeys(r["dataset"] for r in rows):
            sub = [r for r in rows if r["dataset"] == ds and r["kind"] == "loglik_vs_epsilon"]
            n, nt = sub[0]["n"], sub[0]["n_test"]
            gm = _em_value(rows, ds, "EM-GMM (non-private)", "inf")
            sn = _em_value(rows, ds, "EM-MSNM (non-private)", "inf")
            out += [f"**{ds}** (study `{p['study']}`, {cfg['trials']} trials, n = {n} training / {nt} held-out, "
                    f"G = {cfg['components']}, T = {cfg['iterations']}, SAGMM blocks = {cfg['blocks']}, "
                    f"delta = {cfg['delta']:g}); non-private EM: GMM {gm}, skew-normal {sn}.", "",
                    "| epsilon | " + " | ".join(EM_METHODS) + " |", "| --- " * (len(EM_METHODS) + 1) + "|"]
            for eps in sorted({r["epsilon"] for r in sub if isinstance(r["epsilon"], (int, float))
                               and math.isfinite(r["epsilon"])}):
                out.append(f"| {eps:g} | " + " | ".join(_em_value(rows, ds, m, eps) for m in EM_METHODS) + " |")
            out.append("")
    out.append("Run time of the committed runs (2 CPU cores shared with other jobs, one torch thread): "
               + ", ".join(f"`{p['study']}` {p['runtime_seconds']:.0f} s" for p in payloads) + ".")
    return "\n".join(out).rstrip()


def bench_block(res: dict) -> str:
    sn = res["skew_normal"]
    return "\n".join([
        "| EM | ours (s, median) | baseline (s, median) | speedup | largest relative log-likelihood difference |",
        "| --- | --- | --- | --- | --- |",
        f"| GMM vs scikit-learn loop | {res['median_ours']:.3g} | {res['median_sklearn_loop']:.3g} | "
        f"{res['speedup']:.1f}x | {res['max_rel_loglik_diff']:.1e} |",
        f"| skew-normal vs direct implementation | {sn['median_ours']:.3g} | {sn['median_direct']:.3g} | "
        f"{sn['speedup']:.1f}x | {sn['max_rel_loglik_diff']:.1e} |",
        "",
        f"Load average during the run: {', '.join(f'{x:.1f}' for x in res['load_average'])} "
        f"({res['cpu_count']} CPUs, {res['torch_threads']} torch thread).",
    ])


def _replace(text: str, name: str, block: str) -> str:
    pat = re.compile(rf"(<!-- BEGIN GENERATED: {re.escape(name)} -->\n)(.*?)(<!-- END GENERATED: {re.escape(name)} -->)",
                     re.S)
    if not pat.search(text):
        raise SystemExit(f"markers for {name!r} not found")
    return pat.sub(lambda m: m.group(1) + block + "\n" + m.group(3), text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    jobs = [(ROOT / "docs" / "bayes.md", "xi-parkinson", parkinson_block(json.loads(PARKINSON_JSON.read_text()))),
            (ROOT / "docs" / "em.md", "em-heldout", em_block([json.loads(p.read_text()) for p in EM_JSONS])),
            (ROOT / "docs" / "em.md", "em-bench", bench_block(json.loads(BENCH_JSON.read_text())))]
    stale = []
    for doc, name, block in jobs:
        old = doc.read_text()
        new = _replace(old, name, block)
        if new != old:
            stale.append(f"{doc.relative_to(ROOT)}:{name}")
            if a.write:
                doc.write_text(new)
    if a.check and stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
