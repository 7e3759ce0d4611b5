"""The zoo's and the scorecard's area floor is the metric's own resolution, and an arm that never
learned a task reads "not learned" on the leaderboard, never a length ratio (issue 63 item 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import protocol, scorecard, stats, zoo_page


def _runs(error_name: str, errors: list[float], n_test: float = 2048.0) -> pd.DataFrame:
    key = "test/acc" if "accuracy" in error_name else "test/rel_mse"
    values = [1 - e for e in errors] if key == "test/acc" else errors
    return stats.add_error(pd.DataFrame({key: values, "task.n_test": n_test, "task": "t", "arm": "a",
                                         "task.n_train": 64, "seed": range(len(errors))}))


def test_an_error_below_the_metrics_resolution_counts_as_it():
    acc = scorecard.floored(_runs("accuracy", [0.0, 1e-5, 0.01]))
    assert np.allclose(acc["error"], [0.5 / 2048, 0.5 / 2048, 0.01])
    mse = scorecard.floored(_runs("rel_mse", [1e-11, 1e-7, 0.3]))
    assert np.allclose(mse["error"], [scorecard.REL_MSE_FLOOR, scorecard.REL_MSE_FLOOR, 0.3])
    # without n_test (a run closed before its params) nothing is floored
    assert scorecard.floored(_runs("accuracy", [0.0], n_test=np.nan))["error"].tolist() == [0.0]
    words = scorecard.floor_words(acc)
    assert "accuracy 0.5/n_test" in words and "n_test = 2048: 0.000244" in words and "relative MSE 1e-06" in words


def test_the_floor_bounds_the_area_an_exact_fit_earns():
    """Before the floor, an arm at 1e-12 on some seeds read an area of about −20 (mlp_mixer on
    `repeated`): round-off, not learning, decided its row."""
    rows = []
    for n, err in ((64, 1e-12), (256, 1e-13)):
        rows += [{"test/acc": 1 - err, "task.n_test": 2048.0, "task": "t", "arm": "a", "task.n_train": n,
                  "seed": s, "train.lr": 0.01, "val/best_error": err, "val/best_loss": 0.1, "status": "FINISHED"} for s in range(3)]
    df = scorecard.floored(stats.add_error(pd.DataFrame(rows)))
    values, _, why = protocol.arm_values(df, "t", "a", "auc")
    assert why is None and np.allclose(values, np.log(0.5 / 2048))


def test_an_arm_at_the_trivial_predictors_error_is_not_learned():
    runs = _runs("rel_mse", [0.8, 0.9]).assign(reference_error=0.54)
    assert zoo_page.not_learned(runs)
    assert not zoo_page.not_learned(runs.assign(error=[1e-5, 1e-5]))
    assert not zoo_page.not_learned(runs.assign(reference_error=np.nan))  # no reference: no claim
    # a causal arm on a teacher task: its prefix mean errs 1.28, worse than predicting 0 (relative MSE 1),
    # and the length column holds it to the zero predictor as its rows are (protocol.reference)
    assert zoo_page.not_learned(runs.assign(error=[1.1, 1.1], reference_error=1.28))


def test_the_causal_and_positional_references_are_measured_as_declared():
    """M4a with a causal mask measures causal and loses only permutation; M4a with learned
    positions is neither causal nor permutation equivariant (issue 63 item 1)."""
    import torch

    from harness.external_check import causality_refusal, measure_redrawn
    from harness.models import build_model
    from harness.models.attention import AttentionConfig

    for cfg, causal in ((AttentionConfig(causal_mask=True), True), (AttentionConfig(learned_positions=True), False)):
        model = build_model(cfg, 8, 6, torch.Generator().manual_seed(0))
        why, leak, _ = causality_refusal(model, 8, 6)
        assert why is None and (leak < 1e-12) is causal
        errors, _ = measure_redrawn(model, 8, 6)
        assert model.symmetries == {"orthogonal_knowledge"}
        assert errors["symmetry/rotation_knowledge_err"] < 1e-10 and errors["symmetry/permutation_err"] > 1e-3
    plain = build_model(AttentionConfig(), 8, 6, torch.Generator().manual_seed(0))
    assert causality_refusal(plain, 8, 6)[0] is None and plain.symmetries == {"orthogonal_knowledge", "permutation"}
    # the options off: M4a's parameters are drawn as before and its trial id is unchanged
    from harness.records import drop_neutral

    model = {"name": "attention", "sigma": "softmax", "causal_mask": False, "learned_positions": False}
    assert drop_neutral({"model": model}) == {"model": {"name": "attention", "sigma": "softmax"}}
