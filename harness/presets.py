"""The named presets of ``conf/model/`` (the variant names MLflow shows), composed by Hydra.

``preset_config("quad_sigma", ("model.sigma=relu",))`` returns the same config dataclass a run
with ``model=quad_sigma model.sigma=relu`` gets. Used by the tests and ``python -m
harness.variant_table`` (docs/variants.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

CONF = Path(__file__).resolve().parents[1] / "conf"


PRESET_CONFIG = "preset"  # conf/preset.yaml
EXTERNAL = "external"  # conf/model/external.yaml names code outside the package: no family preset


def preset_names() -> list[str]:
    """Every preset of a registered family in ``conf/model/``, sorted (``external`` left out)."""
    return sorted(p.stem for p in (CONF / "model").glob("*.yaml") if p.stem != EXTERNAL)


def preset_header(name: str) -> tuple[str, str]:
    """``(paper id, formula)`` from the preset's first line ``# <id>: <formula>``."""
    first = (CONF / "model" / f"{name}.yaml").read_text().splitlines()[0]
    ident, _, formula = first.lstrip("# ").partition(": ")
    return ident, formula


@functools.lru_cache(maxsize=None)
def preset_config(name: str, overrides: tuple[str, ...] = ()) -> Any:
    """The model config dataclass of ``model=name`` plus Hydra ``overrides`` (``model.k=4``).

    Raises:
        hydra.errors.ConfigCompositionException: for an unknown preset or a bad override.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from harness.config import register_configs  # imports harness.models: import it lazily

    register_configs()
    overrides = [f"model={name}", *overrides]
    # conf/preset.yaml: the model group alone (a run's `model` is `Any` in base_config, so the
    # node is the one `config` composes), at about half the CPU of composing a whole run's config
    if GlobalHydra.instance().is_initialized():  # inside a Hydra app (e.g. analysis.report)
        return OmegaConf.to_object(compose(config_name=PRESET_CONFIG, overrides=overrides).model)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=PRESET_CONFIG, overrides=overrides)
    return OmegaConf.to_object(cfg.model)
