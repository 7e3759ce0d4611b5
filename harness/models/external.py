"""A sequence mixer from outside the package, named by import path (``model=external``).

Inside the package every family is an explicit registry entry (:mod:`harness.models.registry`);
code the package does not own can only be named by where it lives, so the one entry
``external`` imports ``model.target`` (``package.module:ClassName``) and builds it as
``cls(d, n_max, generator, **model.kwargs)``. The contract of such a class:

* ``__init__(self, d: int, n_max: int, generator: torch.Generator, **kwargs)``: draw every
  parameter from ``generator`` (no global RNG); ``n_max`` is the longest training length.
* ``forward(x: (B, n, d)) -> (B, n, d)``, rows are tokens (the paper's ``Xᵀ``, docs/theory.md §1).
* optional ``symmetries``: the subset of ``orthogonal_knowledge``, ``orthogonal``,
  ``permutation`` it claims; each claim is measured before any trial (:func:`check`) and a
  refuted one stops the invocation (exit 2).
* optional ``causal``: ``True`` when output ``i`` reads tokens ``j ≤ i`` only; a true claim is
  measured before any trial (a change at position t changes no output before t, float64,
  :func:`harness.external_check.causality_refusal`) and a false one stops the invocation; the
  zoo also refuses a causal mixer that does not declare it.
* optional ``rotate_(Q)``: transform its embedding-space parameters in place so that
  ``rotate(f, Q)(QX) = Q f(X)`` (paper.md §9, C4); without it ``orthogonal_knowledge`` is not
  measured.
* optional ``span_knowledge() -> (d, k) | None`` (the span residual, docs/variants.md).

``model.blocks = L ≥ 1`` builds L copies of the class, each in a pre-norm residual block
(:mod:`harness.models.stack`, as for every family); the stack declares the symmetries and the
causality it keeps of the class's, and the pre-flight measures them on the stack.

The class is imported by :func:`tasks.user_code.load_class`, which also remembers its module
for the Ray ``runtime_env`` that ships it to a cluster's workers; the vmap probe for packing
(:func:`vmap_reason`) lives here too.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict

import torch
from torch import nn

from harness.models.common import SYMMETRIES
from tasks.user_code import did_you_mean, load_class

NAME = "external"
REGIME_KEY = "model.blocks"  # the depth: a regime (its trials' params), not part of a variant's name
PROBE_B, PROBE_N = 3, 5  # the probe batch: B sequences of n tokens (n ≤ n_max)


@dataclass
class ExternalConfig:
    """Options of a model named by import path (registry name ``external``).

    ``kwargs`` go to the class's constructor as keyword arguments and are part of the trial's
    identity (its id and MLflow params ``model.kwargs.<key>``).
    """

    name: str = NAME
    # "package.module:ClassName", importable from the driver's sys.path; empty = not given (an
    # error when built: not MISSING, so that an ablation grid can set it like any value)
    target: str = ""
    kwargs: Dict[str, Any] = field(default_factory=dict)  # constructor keyword arguments
    blocks: int = 0  # 0: the class alone; L ≥ 1: L pre-norm residual blocks of it (harness/models/stack.py)
    variant: str = ""  # the name MLflow and the plots show; default: the class name. Not part of the
    # trial id (harness.records.drop_neutral): a plug-in name reuses the runs of its import path


def load_target(target: str) -> type:
    """The class named by ``target`` (``package.module:ClassName``), imported
    (:func:`tasks.user_code.load_class`, which remembers its module for Ray's ``runtime_env``).

    Raises:
        ValueError: a malformed path, a module that does not import (with its error), a missing
            attribute, or an attribute that is not an ``nn.Module`` class; the message names
            ``model.target`` and what is wrong.
    """
    if not target:
        raise ValueError("model=external needs model.target=package.module:ClassName")
    return load_class(target, nn.Module, "model.target", "an nn.Module class")


def variant_name(overrides: list[str] | tuple[str, ...]) -> str | None:
    """The variant of a ``model=external`` trial from its overrides: ``model.variant`` if given,
    else the class name of ``model.target``, with the other ``model.*`` overrides in brackets
    (``LinearAttention[kwargs.k=8]``); ``None`` without a ``model.target`` override."""
    given = dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
    target = given.get("model.target")
    if target is None:
        return None
    base = given.get("model.variant") or target.rpartition(":")[2]
    rest = [f"{k.split('.', 1)[1]}={v}" for k, v in given.items()
            if k.startswith("model.") and k not in ("model.target", "model.variant", REGIME_KEY)]
    return f"{base}[{','.join(rest)}]" if rest else base


def build_external(cfg: ExternalConfig, d: int, n_max: int, generator: torch.Generator) -> nn.Module:
    """``cls(d, n_max, generator, **cfg.kwargs)`` for the class ``cfg.target``.

    Raises:
        ValueError: as :func:`load_target`; a constructor that cannot take these arguments
            (naming its signature); a constructor that raises (with its error).
    """
    cls = load_target(cfg.target)
    kwargs = dict(cfg.kwargs)
    try:
        inspect.signature(cls).bind(d, n_max, generator, **kwargs)
    except TypeError as err:
        raise ValueError(f"model.target={cfg.target!r}: constructor {cls.__name__}"
                         f"{inspect.signature(cls)} cannot take (d, n_max, generator, "
                         f"**{kwargs}): {err}{_kwarg_hint(cls, kwargs)}") from err
    try:
        return cls(d, n_max, generator, **kwargs)
    except Exception as err:
        raise ValueError(f"model.target={cfg.target!r}: {cls.__name__}(d={d}, n_max={n_max}, "
                         f"generator, **{kwargs}) raised {type(err).__name__}: {err}") from err


def _kwarg_hint(cls: type, kwargs: dict) -> str:
    """``"; did you mean model.kwargs.k?"`` for the first of ``kwargs`` the constructor has no
    parameter of that name for, closest to one it has; ``""`` otherwise."""
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return ""
    names = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL][3:]
    for key in kwargs:
        if key not in params:
            hint = did_you_mean(key, names)
            return hint.replace("mean '", "mean model.kwargs.").replace("'?", "?") if hint else ""
    return ""


def declared(model: nn.Module, target: str) -> frozenset[str]:
    """The symmetries ``model`` declares (``symmetries``; none if absent).

    Raises:
        ValueError: a name outside ``orthogonal_knowledge, orthogonal, permutation``.
    """
    names = frozenset(getattr(model, "symmetries", ()) or ())
    if not names <= SYMMETRIES:
        raise ValueError(f"model.target={target!r}: symmetries {sorted(names - SYMMETRIES)} "
                         f"unknown; allowed: {sorted(SYMMETRIES)}")
    return names


_VMAP: dict[str, str | None] = {}  # repr of (model config, d, n) → why vmap cannot run it


def vmap_reason(cfg: Any) -> str | None:
    """Why the external model of the trial ``cfg`` cannot be packed (``None``: it can):
    ``torch.func.vmap`` over two stacked copies of its parameters, forward and backward, on a
    probe batch, as :mod:`harness.pack` runs a pack. Measured once per model config and task."""
    key = repr((cfg.model, cfg.task))
    if key not in _VMAP:
        _VMAP[key] = _probe_vmap(cfg)
    return _VMAP[key]


def _probe_vmap(cfg: Any) -> str | None:
    from torch.func import functional_call, vmap

    from tasks import build_task  # tasks sit beside harness: imported where used

    task = build_task(cfg.task)
    model = build_external(cfg.model, task.d, task.n_max, torch.Generator().manual_seed(0))
    params = {k: torch.stack([p.detach(), p.detach()]).requires_grad_() for k, p in model.named_parameters()}
    x = torch.randn(2, 2, min(PROBE_N, task.n_max), task.d, generator=torch.Generator().manual_seed(1))
    try:
        out = vmap(lambda p, xs: functional_call(model, p, (xs,)))(params, x)
        out.square().sum().backward()
    except Exception as err:  # noqa: BLE001 - whatever vmap refuses is the reason
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return f"model external {cfg.model.target}: torch.func.vmap cannot run it ({type(err).__name__}: {first[:120]})"
    return None
