"""C2 as a direct identity check (paper.md §5, §13 C2): harness/counterexample.py and its E rows
in analysis/paper.py, no training."""

from __future__ import annotations

import pytest
import torch

from analysis.claims import (CONTRADICTED, FAILED, INCONCLUSIVE, PASSED, SUPPORTED, Evidence, check,
                             identity_part)
from analysis.paper import CLAIMS
from harness.counterexample import KEYS, measure_counterexample, swap_plus_minus
from harness.fip import enumerate_terms
from tasks.arithmetic import ArithmeticConfig, ArithmeticTask

C2 = next(c for c in CLAIMS if c.id == "C2")


@pytest.fixture(scope="module")
def measured() -> dict[str, float]:
    return measure_counterexample()


def _evidence(counterexample: dict[str, float]) -> Evidence:
    import pandas as pd

    runs = {"arithmetic": pd.DataFrame({"status": ["FINISHED"], "variant": ["xg_noknow"],
                                        "test/acc_not_answer_in_input": [0.0]})}
    return Evidence(runs, pd.DataFrame(columns=["preset"]), enumerate_terms(4), counterexample)


def test_q12_is_the_coordinate_swap_of_plus_and_minus_on_one_hot_tokens():
    task = ArithmeticTask(ArithmeticConfig(), torch.float64)
    q12 = swap_plus_minus(task.E)
    eye = torch.eye(12, dtype=torch.float64)
    assert torch.equal(q12, eye[[1, 0, *range(2, 12)]])  # paper.md §5: swap coordinates 1 and 2
    torch.testing.assert_close(q12 @ q12.T, eye, rtol=0, atol=0)
    plus, minus = task.E.T[task.encode("2+1")], task.E.T[task.encode("2-1")]
    assert torch.equal(plus @ q12.T, minus)


def test_identities_hold_for_m2_and_rotated_m0_and_break_for_fixed_m0_and_mlp(measured):
    assert set(measured) == set(KEYS)
    for key in KEYS[:5]:
        assert measured[key] <= 1e-10, key
    assert measured["c2/m0_fixed_err"] > 1e-3  # fixed knowledge can tell "2+1" from "2−1"
    assert measured["c2/mlp_err"] > 1e-3  # not equivariant: violates f(Q12 X) = Q12 f(X)


def test_c2_is_an_implementation_check_that_passes_on_the_measured_identities(measured):
    assert C2.kind == "E"
    status, parts = check(C2, _evidence(measured))
    assert status == PASSED, [(p.what, p.verdict, p.evidence) for p in parts]
    assert sum("Q12" in p.what for p in parts) >= 3


def test_c2_fails_when_an_identity_is_violated_and_is_incomplete_unmeasured(measured):
    broken = {**measured, "c2/m2_equivariance_err": 0.3}  # e.g. M2 given a fixed-basis weight
    status, parts = check(C2, _evidence(broken))
    assert status == FAILED
    assert [p.verdict for p in parts if "m2_equivariance" in p.evidence.name] == [CONTRADICTED]
    invisible = {**measured, "c2/mlp_err": 1e-16}  # a baseline that no longer breaks it
    assert check(C2, _evidence(invisible))[0] == FAILED
    assert check(C2, _evidence({}))[0] != PASSED


def test_identity_part_thresholds():
    ev = _evidence({"c2/x": 1e-12, "c2/y": 0.5})
    assert identity_part("", "c2/x", True)(ev).verdict == SUPPORTED
    assert identity_part("", "c2/y", True)(ev).verdict == CONTRADICTED
    assert identity_part("", "c2/y", False)(ev).verdict == SUPPORTED
    assert identity_part("", "c2/x", False)(ev).verdict == CONTRADICTED
    assert identity_part("", "c2/z", True)(ev).verdict == INCONCLUSIVE
