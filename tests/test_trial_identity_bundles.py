"""Display names are not identity (issue 63 item 5): the trial ids of the committed bundles
(``docs/report/runs.csv.gz``, ``docs/zoo/runs.csv.gz``) recompute from each run's params, and an
external model's ``model.variant`` (the zoo's arm name, a plug-in's entry-point name) is left
out of the id while every built-in family's id is unchanged.

A run's params are ``flatten(identity_dict(config))`` written as text (:mod:`harness.tracking`);
the bundle stores them as CSV cells, so each cell is read back to the type its config schema
gives the key (``8.0`` → ``8`` for an int) before the id is hashed again."""

from __future__ import annotations

import ast
import dataclasses
import typing
from enum import Enum
from pathlib import Path

import pandas as pd
import pytest

from harness.config import TrainConfig
from harness.expansion import identity_dict, identity_id
from harness.models.external import ExternalConfig
from harness.models.registry import MODELS
from harness.records import drop_neutral
from tasks import TASKS

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = {"report": ROOT / "docs" / "report" / "runs.csv.gz", "zoo": ROOT / "docs" / "zoo" / "runs.csv.gz"}
GROUPS = ("model", "task", "train")


def _hints(schema: type) -> dict[str, typing.Any]:
    return typing.get_type_hints(schema) if dataclasses.is_dataclass(schema) else {}


def _cast(text: str, hint: typing.Any) -> typing.Any:
    """A param's CSV cell as the value its schema's type gives it."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union:  # Optional[X]
        return None if text in ("None", "") else _cast(text, args[0])
    if hint is bool:
        return text in ("True", "true")
    if hint is int:
        return int(float(text))
    if hint is float:
        return float(text)
    if hint is str or (isinstance(hint, type) and issubclass(hint, Enum)):
        return text
    try:
        return ast.literal_eval(text)  # lists, dicts' leaves (model.kwargs.*), Any
    except (ValueError, SyntaxError):
        return text


def _schemas(row: dict[str, str]) -> dict[str, dict[str, typing.Any]]:
    model = ExternalConfig if row["model.name"] == "external" else MODELS[row["model.name"]].schema
    return {"model": _hints(model), "task": _hints(TASKS[row["task.name"]].schema), "train": _hints(TrainConfig)}


def recomputed(row: dict[str, str]) -> str:
    """The trial id of one bundle row, from its params alone."""
    schemas = _schemas(row)
    identity: dict[str, typing.Any] = {"seed": int(float(row["seed"]))}
    for key, text in row.items():
        group, _, leaf = key.partition(".")
        if group not in GROUPS or not leaf or text == "":
            continue
        node = identity.setdefault(group, {})
        *path, last = leaf.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = _cast(text, schemas[group].get(path[0] if path else last, typing.Any))
    return identity_id(drop_neutral(identity))


@pytest.mark.parametrize("which", BUNDLES)
def test_the_committed_bundles_trial_ids_recompute_unchanged(which):
    df = pd.read_csv(BUNDLES[which], dtype=str, keep_default_na=False, low_memory=False)
    df = df[df["role"] == "trial"]
    # the grid's runs and their reruns alike; an external model's (the zoo's arms) changes by
    # design: its display name model.variant left the identity
    # a run another invocation closed as stale before its params were written has none to read
    builtin = df[(df["model.name"] != "external") & (df["model.name"] != "")]
    assert len(builtin) > 1000
    columns = [c for c in df.columns if c == "seed" or c.split(".", 1)[0] in GROUPS and "/" not in c]
    rows = builtin[["trial_id", *columns]].drop_duplicates("trial_id").to_dict("records")
    wrong = [r["trial_id"] for r in rows if recomputed(r) != r["trial_id"]]
    assert not wrong, f"{len(wrong)} of {len(rows)} ids move, e.g. {wrong[:3]}"


def test_an_external_models_display_name_is_not_part_of_its_id():
    df = pd.read_csv(BUNDLES["zoo"], dtype=str, keep_default_na=False, low_memory=False)
    row = df[(df["role"] == "trial") & (df["model.name"] == "external")].iloc[0].to_dict()
    renamed = {**row, "model.variant": "another_name"}
    assert recomputed(row) == recomputed(renamed)
    # its kwargs still are: the causal and the bidirectional form are two trials
    flipped = {**row, "model.kwargs.causal": "False" if row["model.kwargs.causal"] == "True" else "True"}
    assert recomputed(flipped) != recomputed(row)


def test_a_plug_in_name_and_its_import_path_compose_to_one_trial():
    target = "my_mixers.gated:GatedLinearAttention"
    plain = {"model": dataclasses.asdict(ExternalConfig(target=target, variant="")), "seed": 0}
    named = {"model": dataclasses.asdict(ExternalConfig(target=target, variant="gla")), "seed": 0}
    assert identity_id(drop_neutral(named)) == identity_id(drop_neutral(plain))
    assert "variant" in named["model"]  # drop_neutral copies; the run's config keeps the name
    other = {"model": dataclasses.asdict(ExternalConfig(target=target, kwargs={"k": 4})), "seed": 0}
    assert identity_id(drop_neutral(other)) != identity_id(drop_neutral(plain))
