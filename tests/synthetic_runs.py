"""Synthetic runs tables in the analysis input contract (one row per trial, already through
``stats.add_error`` and ``stats.select_lr``, with an ``arm`` column), for the figure and table
tests. No training, no MLflow."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import stats

KS = (16, 2, 32, 4, 8)  # deliberately in text order
SIZES = (128, 8, 64, 16)


def knowledge_size(seeds=range(5), sizes=SIZES, ks=KS, noise=0.05) -> pd.DataFrame:
    """T3a-like runs: ``test/rel_mse = (0.2 + 2/k) · n^−0.4 · (1 + noise·N(0,1))`` for arm
    ``softmax_free[k=<k>]``; a relative-MSE task with its uniform-mixing reference at 0.7."""
    rng = np.random.default_rng(0)
    rows = []
    for k in ks:
        for n in sizes:
            for s in seeds:
                err = (0.2 + 2 / k) * n**-0.4 * (1 + noise * rng.standard_normal())
                rows.append({"run_id": f"k{k}-{n}-{s}", "status": "FINISHED", "diverged": False,
                             "task": "teacher", "variant": "softmax_free", "arm": f"softmax_free[k={k}]",
                             "model.k": k, "task.n_train": n, "seed": s, "train.lr": 0.01,
                             "val/best_error": err, "test/rel_mse": err, "test/loss": err,
                             "test/uniform_rel_mse": 0.7, "n_params": 32 * k,
                             "symmetry/permutation_err": 1e-7 * (1 + rng.random())})
    return contract(pd.DataFrame(rows))


def contract(df: pd.DataFrame) -> pd.DataFrame:
    """What the integrator passes: ``add_error`` then ``select_lr`` per task × variant × n_train."""
    return stats.select_lr(stats.add_error(df), group=("task", "variant", "task.n_train"))


def tokens(seeds=range(5), sizes=(12, 25, 50), variants=("xg", "value", "general")) -> pd.DataFrame:
    """T1-like runs: accuracy, absent-answer accuracy (0 for ``xg``), majority class 0.2."""
    rng = np.random.default_rng(1)
    rows = []
    for v in variants:
        for n in sizes:
            for s in seeds:
                acc = min(1.0, 0.5 + n / 100 + 0.03 * rng.standard_normal())
                absent = 0.0 if v == "xg" else min(1.0, max(0.0, n / 60 + 0.05 * rng.standard_normal()))
                rows.append({"run_id": f"{v}-{n}-{s}", "status": "FINISHED", "diverged": False,
                             "task": "arithmetic", "variant": v, "arm": v, "task.n_train": n,
                             "seed": s, "train.lr": 0.01, "val/best_error": 1 - acc, "test/acc": acc,
                             "test/majority_acc": 0.2, "test/acc_answer_in_input": acc,
                             "test/acc_not_answer_in_input": absent, "n_params": 100})
    return contract(pd.DataFrame(rows))


def rotation(seeds=range(5)) -> pd.DataFrame:
    """T2-like runs at one n_train: modes eval/none/retrain × sgd/adam; in ``eval`` mode the
    knowledge-rotated loss equals the loss up to 1e-14 for ``softmax``, while ``coordwise``
    (B7) and every knowledge-fixed model lose."""
    rng = np.random.default_rng(2)
    rows = []
    for v in ("softmax", "coordwise"):
        for mode in ("eval", "none", "retrain"):
            for opt in ("sgd", "adam"):
                for s in seeds:
                    loss = 0.3 + 0.05 * rng.random()
                    row = {"run_id": f"{v}-{mode}-{opt}-{s}", "status": "FINISHED", "diverged": False,
                           "task": "arithmetic_rotation", "variant": v, "task.rotation": mode,
                           "train.optimizer": opt, "arm": f"{v} · rotation={mode} · optimizer={opt}",
                           "task.n_train": 512, "seed": s, "train.lr": 0.05, "train.dtype": "float64",
                           "test/acc": 1 - loss, "test/majority_acc": 0.1, "test/loss": loss,
                           "val/best_error": loss, "n_params": 50}
                    if mode == "eval":
                        row["test/rotated/loss"] = loss * (1 + (1e-14 if v == "softmax" else 0.5) * rng.random())
                        row["test/rotated_fixed/loss"] = loss * (2 + rng.random())
                    rows.append(row)
    return contract(pd.DataFrame(rows))
