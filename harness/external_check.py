"""The pre-flight check of a model named by import path (``model=external``,
:mod:`harness.models.external`): its output shape on a probe batch and its symmetries measured
on re-drawn weights (issue "bring your own architecture"; theory.md on the three symmetries).

Kept out of ``harness/models/``: it measures through :mod:`harness.symmetry`, which sits above the
model families, and is called by :mod:`harness.validate` and :mod:`analysis.scorecard`.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import torch
from torch import Tensor, nn

from harness.models.external import NAME, PROBE_B, PROBE_N, declared
from harness.symmetry import causality_leak, measure, redraw_

# Measured-symmetry tolerances (relative Frobenius error, harness.symmetry.measure): a claim
# holds when its error is at most this. float64 round-off of an exact symmetry is ~1e-15 at the
# probe's sizes; float32's ~1e-6 (a model that cannot run in float64 is measured in float32).
TOLERANCE = {torch.float64: 1e-8, torch.float32: 1e-4}
KEY_OF = {"orthogonal_knowledge": "symmetry/rotation_knowledge_err",
          "orthogonal": "symmetry/rotation_err", "permutation": "symmetry/permutation_err"}
_REPORTED: set[str] = set()  # models whose measured symmetries were printed


def _in_float64(model: nn.Module, x: Tensor) -> tuple[nn.Module, Tensor]:
    """``model`` and ``x`` in float64 where the model runs in it, else both in float32."""
    try:
        m64 = copy.deepcopy(model).double()
        m64(x.double())
        return m64, x.double()
    except Exception:  # noqa: BLE001 - a model that cannot run in float64 is measured in float32
        return copy.deepcopy(model).float(), x.float()


def measure_redrawn(model: nn.Module, d: int, n_max: int) -> tuple[dict[str, float], torch.dtype]:
    """:func:`harness.symmetry.measure` on a copy of ``model`` whose every parameter is
    re-drawn at O(1) scale from a fixed generator (:func:`harness.symmetry.redraw_`: a
    zero-initialised positional table would look equivariant at init), on one batch
    ``(PROBE_B, min(PROBE_N, n_max), d)``, in float64 where the model allows (else float32).

    Returns:
        ``({symmetry/* key: relative error}, dtype)``.
    """
    x = torch.randn(PROBE_B, min(PROBE_N, n_max), d, generator=torch.Generator().manual_seed(3),
                    dtype=torch.float64)
    probe, x = _in_float64(model, x)
    redraw_(probe, torch.Generator().manual_seed(2))
    return measure(probe, x, torch.Generator().manual_seed(4)), x.dtype


def declared_causal(model: nn.Module) -> bool:
    """Whether ``model`` declares itself causal: its ``causal`` attribute (the zoo's mixers take
    it as a constructor argument; a built-in family's config has it), else its config's, else
    not causal.

    Raises:
        ValueError: a ``causal`` that is not a bool (``"yes"``, 1) names the value.
    """
    value = getattr(model, "causal", getattr(getattr(model, "cfg", None), "causal", False))
    if not isinstance(value, bool):
        raise ValueError(f"causal must be True or False, got {value!r} ({type(value).__name__})")
    return value


def measure_causality(model: nn.Module, d: int, n_max: int) -> tuple[float, torch.dtype]:
    """:func:`harness.symmetry.causality_leak` on a re-drawn copy of ``model`` (as
    :func:`measure_redrawn`: float64 where the model runs in it), on ``(PROBE_B, min(PROBE_N,
    n_max), d)``. Returns ``(the largest relative leak, dtype)``; at most ``TOLERANCE[dtype]``
    is causal.

    Raises:
        ValueError: ``n_max < 2``.
    """
    x = torch.randn(PROBE_B, min(PROBE_N, n_max), d, generator=torch.Generator().manual_seed(3),
                    dtype=torch.float64)
    probe, x = _in_float64(model, x)
    redraw_(probe, torch.Generator().manual_seed(2))
    return causality_leak(probe, x, torch.Generator().manual_seed(5)), x.dtype


def causality_refusal(model: nn.Module, d: int, n_max: int) -> tuple[str | None, float, torch.dtype]:
    """``(None or why the declaration is false, the measured leak, dtype)``: a model declaring
    ``causal`` whose earlier outputs move when a later token changes, or one that does not
    declare it although none moves (found, not declared), is refused as a false symmetry is."""
    said = declared_causal(model)
    leak, dtype = measure_causality(model, d, n_max)
    holds = leak <= TOLERANCE[dtype]
    if said == holds:
        return None, leak, dtype
    what = ("declares causal, but a change at position t moved outputs before t" if said
            else "found causal, not declared (causal = True)")
    return (f"{what} (relative leak {leak:.1e} on re-drawn {str(dtype)[6:]} weights; "
            f"tolerance {TOLERANCE[dtype]:g})"), leak, dtype


def symmetry_table(errors: dict[str, float], dtype: torch.dtype, claims: frozenset[str]) -> dict[str, str]:
    """``{symmetry: "holds"|"does not hold"|"not measured"}`` plus ``declared``/``found``:
    a measured error at most ``TOLERANCE[dtype]`` holds."""
    tol, out = TOLERANCE[dtype], {}
    for name, key in KEY_OF.items():
        err = errors.get(key)
        state = "not measured" if err is None else ("holds" if err <= tol else "does not hold")
        note = " (declared)" if name in claims else (" (found, not declared)" if state == "holds" else "")
        out[name] = state + note
    return out


def check(cfg: Any, model: nn.Module, d: int, n_max: int) -> None:
    """Pre-flight check of an external model (a no-op for a registered family): its output
    shape on a probe batch, and every declared symmetry measured on re-drawn weights
    (:func:`measure_redrawn`). Prints one line: each symmetry's error, dtype, tolerance, and
    which hold without being declared ("found").

    Raises:
        ValueError: a forward that raises or returns another shape than ``(B, n, d)``, a
            declared symmetry whose measured error exceeds the tolerance, or a declared
            ``causal`` whose earlier outputs move with a later token; names ``model.target``.
    """
    if getattr(cfg, "name", None) != NAME:
        return
    n = min(PROBE_N, n_max)
    x = torch.randn(PROBE_B, n, d, generator=torch.Generator().manual_seed(1))
    try:
        out = model.to(torch.float32)(x)
    except Exception as err:
        raise ValueError(f"model.target={cfg.target!r}: forward on (B, n, d)={tuple(x.shape)} raised "
                         f"{type(err).__name__}: {err}") from err
    if not isinstance(out, Tensor) or out.shape != x.shape:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"model.target={cfg.target!r}: forward must map (B, n, d)={tuple(x.shape)} "
                         f"to the same shape, got {got}")
    claims = declared(model, cfg.target)
    errors, dtype = measure_redrawn(model, d, n_max)
    tol = TOLERANCE[dtype]
    refuted = {s: errors[KEY_OF[s]] for s in claims if errors.get(KEY_OF[s], 0.0) > tol}
    if refuted:
        raise ValueError(f"model.target={cfg.target!r} declares {sorted(refuted)} but the measured "
                         f"relative error on re-drawn {str(dtype)[6:]} weights is "
                         f"{', '.join(f'{s} {e:.1e}' for s, e in refuted.items())} > tolerance {tol:g}")
    if declared_causal(model):  # a false causal declaration refuses as a false symmetry does
        why, _, _ = causality_refusal(model, d, n_max)
        if why:
            raise ValueError(f"model.target={cfg.target!r} {why}")
    table = symmetry_table(errors, dtype, claims)
    key = repr((cfg, d, n_max))
    if key in _REPORTED:  # one line per model, not per trial
        return
    _REPORTED.add(key)
    print(f"model {cfg.target}: symmetries measured on re-drawn {str(dtype)[6:]} weights "
          f"(tolerance {tol:g}): " + "; ".join(
              f"{s} {errors[KEY_OF[s]]:.0e} {table[s]}" if KEY_OF[s] in errors else f"{s} {table[s]}"
              for s in KEY_OF), file=sys.stderr)
