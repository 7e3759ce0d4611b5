"""The verdict rules of analysis/claims.py on synthetic runs tables with known answers."""

from __future__ import annotations

import pandas as pd

from analysis.claims import (CONTRADICTED, INCONCLUSIVE, SUPPORTED, Comparison, Evidence, combine,
                             compare, decide, runs_part, symmetry_part, variants)
from analysis.paper import CLAIMS
from harness.fip import enumerate_terms


def _runs(errors: dict[str, list[float]], task: str = "t", sizes=(64, 256)) -> pd.DataFrame:
    rows = []
    for variant, errs in errors.items():
        for n in sizes:
            for seed, e in enumerate(errs):
                for lr, shift in ((0.01, 0.0), (0.1, 1.0)):  # lr 0.1 is worse on validation
                    rows.append({"status": "FINISHED", "variant": variant, "task": task,
                                 "task.n_train": n, "seed": seed, "train.lr": lr,
                                 "val/best_loss": e + shift, "test/rel_mse": e + shift,
                                 "diverged": False})
    return pd.DataFrame(rows)


def test_better_supported_contradicted_inconclusive():
    runs = {"abl": _runs({"a": [0.10, 0.11, 0.12, 0.10, 0.11], "b": [0.30, 0.31, 0.29, 0.30, 0.32],
                          "c": [0.11, 0.09, 0.12, 0.10, 0.13]})}
    assert compare(runs, Comparison("abl", "t", "a", "b")).verdict == SUPPORTED
    assert compare(runs, Comparison("abl", "t", "b", "a")).verdict == CONTRADICTED
    assert compare(runs, Comparison("abl", "t", "a", "c")).verdict == INCONCLUSIVE
    part = compare(runs, Comparison("abl", "t", "a", "b"))
    assert "n_train=256" in part.evidence and "5 paired seeds" in part.evidence
    assert "error(a) = 0.108" in part.evidence  # lr 0.01 chosen on validation (lr 0.1 is +1)


def test_equivalence_rule():
    close = {"a": [1.00, 1.01, 0.99, 1.00, 1.02], "b": [1.02, 1.03, 1.00, 1.01, 1.04]}
    far = {"a": [1.0] * 5, "b": [2.0, 2.01, 1.99, 2.0, 2.02]}
    eq = lambda r: compare({"abl": _runs(r)}, Comparison("abl", "t", "a", "b", kind="equivalent"))
    assert eq(close).verdict == SUPPORTED
    assert eq(far).verdict == CONTRADICTED


def test_missing_runs_are_inconclusive_and_combine():
    assert compare({}, Comparison("abl", "t", "a", "b")).verdict == INCONCLUSIVE
    assert combine([SUPPORTED, SUPPORTED]) == SUPPORTED
    assert combine([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([SUPPORTED, CONTRADICTED, INCONCLUSIVE]) == CONTRADICTED
    assert combine([]) == INCONCLUSIVE


def test_exact_parts():
    presets = pd.DataFrame([{"preset": "p", "symmetry/permutation_err": 1e-16},
                            {"preset": "q", "symmetry/permutation_err": 0.5}])
    ev = Evidence({"abl": pd.DataFrame({"status": ["FINISHED"] * 2, "variant": ["p", "p"],
                                        "m": [0.0, 0.0]})}, presets, enumerate_terms(4))
    assert symmetry_part("", ["p"], "symmetry/permutation_err", True)(ev).verdict == SUPPORTED
    assert symmetry_part("", ["q"], "symmetry/permutation_err", True)(ev).verdict == CONTRADICTED
    assert symmetry_part("", ["q"], "symmetry/permutation_err", False)(ev).verdict == SUPPORTED
    zero = runs_part("", "abl", variants("p"), "m", lambda v: bool((v == 0).all()), "m")
    assert zero(ev).verdict == SUPPORTED
    assert runs_part("", "nope", variants("p"), "m", lambda v: True, "m")(ev).verdict == INCONCLUSIVE
    derived = runs_part("", "abl", lambda df: df.assign(g=df["m"] + 1), "g",
                        lambda v: bool((v == 1).all()), "g")  # a column the selection derives
    assert derived(ev).verdict == SUPPORTED
    missing = runs_part("", "abl", lambda df: df.assign(g=df["absent"]), "g", lambda v: True, "g")
    assert missing(ev).verdict == INCONCLUSIVE


def test_every_claim_of_the_paper_is_decided():
    assert [c.id for c in CLAIMS] == ["C1", "C2", "C3", "C4", "C5", "C5b", "C6", "C7", "C8", "C9",
                                      "C10", "C11", "C12"]
    ev = Evidence({}, pd.DataFrame(columns=["preset"]), enumerate_terms(6))
    for claim in CLAIMS:
        verdict, parts = decide(claim, ev)
        assert parts and verdict in (SUPPORTED, CONTRADICTED, INCONCLUSIVE)
    assert decide(CLAIMS[6], ev)[0] == SUPPORTED  # C6 needs no runs
