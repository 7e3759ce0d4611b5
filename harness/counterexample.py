"""The arithmetic counterexample as exact identities, no training (paper.md §5, §13 C2).

The paper's one-hot tokens (T1, :mod:`tasks.arithmetic`; ``d = V = 12``, ``+ ↦ e_0``,
``− ↦ e_1``, digit ``j ↦ e_{j+2}``) and ``Q12``, the orthogonal map that swaps the embeddings of
``+`` and ``−``: ``Q12 = I − u uᵀ`` with ``u = E_+ − E_−`` (for one-hot ``E`` the swap of
coordinates 0 and 1; a reflection, ``det Q12 = −1``). Rows are tokens: ``x: (B, n, d)`` is the
paper's ``Xᵀ``, so ``Q12 X`` is ``x @ Q12ᵀ``.

:func:`measure_counterexample` returns, on weights re-drawn at O(1) scale in float64
(:func:`harness.symmetry.redraw_`), over the 110 examples ``X`` of the task:

==============================  ============================================================  ======
key                             what                                                          exact
==============================  ============================================================  ======
``c2/token_swap_err``           ``max |Q12 X("2+1") − X("2−1")|``                             0
``c2/m2_equivariance_err``      M2, nothing transformed: ``‖f(Q12 X) − Q12 f(X)‖ / ‖f(X)‖``   0
``c2/m2_coefficient_gap``       M2: ``max |C("2+1") − C("2−1")|``, mixing ``C = F Xᵀ``        0
                                (``XᵀX = I`` for distinct one-hot tokens)
``c2/m2_digit_logit_gap``       M2, tied readout: ``max |logits("2+1") − logits("2−1")|``     0
                                over the digits at the answer position: one decoded answer
``c2/m0_rotated_err``           M0, knowledge rotated (``rotate(θ, Q12)``, the C4 rules):     0
                                ``‖f_{Q12 θ}(Q12 X) − Q12 f_θ(X)‖ / ‖f_θ(X)‖``
``c2/m0_fixed_err``             M0, knowledge fixed: the same without rotating                > 0
``c2/mlp_err``                  B1 (flattened MLP), weights fixed                             > 0
==============================  ============================================================  ======

The first four are the counterexample: a Prop-1 model cannot tell "2+1" ("3") from "2−1"
("1"). The last three show the paper's way out (§6): with knowledge the identity holds only for
the transformed model ``f(·, Q12 Z)``, so a fixed ``f(·, Z)`` can answer both; a model that is
not equivariant (B1, fixed weights) breaks the identity.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from harness.models import build_model, rotate
from harness.presets import preset_config
from harness.symmetry import redraw_
from tasks.arithmetic import DIGIT0, MINUS, PLUS, ArithmeticConfig, ArithmeticTask

KEYS = ("c2/token_swap_err", "c2/m2_equivariance_err", "c2/m2_coefficient_gap",
        "c2/m2_digit_logit_gap", "c2/m0_rotated_err", "c2/m0_fixed_err", "c2/mlp_err")


def swap_plus_minus(E: Tensor) -> Tensor:
    """``Q12 = I − u uᵀ``, ``u = E_+ − E_−``: ``(d, d)``, orthogonal, swaps the embeddings of
    ``+`` and ``−`` and fixes every vector orthogonal to both (``E: (d, V)``, orthonormal
    columns, the T1 vocabulary)."""
    u = (E[:, PLUS] - E[:, MINUS])[:, None]  # (d, 1), ‖u‖² = 2
    return torch.eye(E.shape[0], dtype=E.dtype) - u @ u.T


def _rel(a: Tensor, b: Tensor, ref: Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(ref).clamp_min(1e-300))


def _model(preset: str, d: int, n_max: int) -> nn.Module:
    model = build_model(preset_config(preset), d, n_max, torch.Generator().manual_seed(0)).double()
    return redraw_(model, torch.Generator().manual_seed(2))


@torch.no_grad()
def measure_counterexample() -> dict[str, float]:
    """The float64 measurements of the module docstring's table, ``{key: value}`` (``KEYS``).

    Deterministic (fixed generators); no training, no data stream beyond the task's fixed
    110-example pool (paper.md §12 T1).
    """
    task = ArithmeticTask(ArithmeticConfig(), torch.float64)  # one-hot, d = V = 12
    q12 = swap_plus_minus(task.E)  # (d, d)
    plus, minus = (task.E.T[task.encode(s)][None] for s in ("2+1", "2-1"))  # (1, 3, d) each
    x = task.E.T[task.batch(task.pool(2), 2).tokens]  # (110, 3, d): every example
    qx = x @ q12.T  # the paper's Q12 X
    m2 = _model("xg_noknow", task.d, x.shape[1])
    digits = slice(DIGIT0, DIGIT0 + 10)
    logits = [task.logits(m2(s))[:, -1, digits] for s in (plus, minus)]  # (1, 10) each
    coeffs = [m2(s) @ s.transpose(-1, -2) for s in (plus, minus)]  # (1, 3, 3): F = C X
    m0, mlp = _model("general", task.d, x.shape[1]), _model("mlp", task.d, x.shape[1])
    out_m0 = m0(x)
    return {
        KEYS[0]: float((plus @ q12.T - minus).abs().max()),
        KEYS[1]: _rel(m2(qx), m2(x) @ q12.T, m2(x)),
        KEYS[2]: float((coeffs[0] - coeffs[1]).abs().max()),
        KEYS[3]: float((logits[0] - logits[1]).abs().max()),
        KEYS[4]: _rel(rotate(m0, q12)(qx), out_m0 @ q12.T, out_m0),
        KEYS[5]: _rel(m0(qx), out_m0 @ q12.T, out_m0),
        KEYS[6]: _rel(mlp(qx), mlp(x) @ q12.T, mlp(x)),
    }


C11_KEYS = ("c11/distinct_gap", "c11/repeated_gap")


@torch.no_grad()
def measure_gram_identity(V: int = 16, n: int = 8) -> dict[str, float]:
    """Claim C11's exact half (paper.md §13): with distinct one-hot tokens ``XᵀX = I``, so M8 with
    ``α XᵀX`` added to its scores (``higher_order_gram``) and the control M8 with ``α I``
    (``higher_order_identity``), given the same weights, compute the same map; with a repeated
    token they differ.

    Returns ``{"c11/distinct_gap": ‖f_gram(X) − f_I(X)‖ / ‖f_gram(X)‖ over 64 sequences of n
    distinct tokens (exactly 0), "c11/repeated_gap": the same over sequences with one token
    repeated (> 0)}``, float64, weights re-drawn at O(1) scale (α included), one-hot ``d = V``.

    Raises:
        ValueError: ``n > V`` or ``n < 2``.
    """
    if not 2 <= n <= V:
        raise ValueError(f"measure_gram_identity: need 2 ≤ n ≤ V, got n={n}, V={V}")
    gram = _model("higher_order_gram", V, n)
    ident = build_model(preset_config("higher_order_identity"), V, n, torch.Generator().manual_seed(0)).double()
    ident.load_state_dict(gram.state_dict())
    g = torch.Generator().manual_seed(3)
    distinct = torch.stack([torch.randperm(V, generator=g)[:n] for _ in range(64)])  # (64, n)
    repeated = distinct.clone()
    repeated[:, -1] = repeated[:, 0]  # one token occurs twice
    eye = torch.eye(V, dtype=torch.float64)
    out = {}
    for key, tokens in zip(C11_KEYS, (distinct, repeated)):
        x = eye[tokens]  # (64, n, V): one-hot rows
        out[key] = _rel(gram(x), ident(x), gram(x))
    return out
