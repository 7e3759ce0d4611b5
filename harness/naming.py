"""Run names and the runs table as the MLflow UI shows them: a child run's name tells it apart
from every other run of its experiment, a parent run's name shows when the invocation started,
and the links the harness prints open a saved view whose columns are the headline metrics and
the key params (:func:`view_state_tag`).

The UI's runs table cuts a name at about 30 characters, so what differs between the runs of one
parent (the variant and the grid point) comes first and keys lose their group prefix
(``n_train=64``, not ``task.n_train=64``); the command line's overrides off the grid follow
(``max_steps=50``): two invocations with another ``train.max_steps`` make runs that differ, and
so do their names. Keys that do not change a trial (``cluster.*``, ``tracking.*``, ``hydra.*``,
the ablation and its scale, ``dry_run``, ``force``, ``summary``) are left out.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from harness.records import Trial


NOT_IN_NAME = ("cluster", "tracking", "hydra", "ablation", "scale", "report", "zoo", "dry_run", "force",
               "summary")


def _pairs(overrides: Sequence[str]) -> list[tuple[str, str]]:
    """``(key, value)`` of each ``key=value`` override, ``+``/``~`` stripped."""
    return [tuple(o.lstrip("+~").split("=", 1)) for o in overrides if "=" in o]


def _shown(key: str) -> bool:
    """Whether ``key`` goes into a name: not the model (the variant names it), not a key that
    leaves the trial unchanged."""
    return key.split(".", 1)[0].split("/", 1)[0] not in (*NOT_IN_NAME, "model")


def run_name(trial: Trial, cli: Sequence[str] = ()) -> str:
    """A child run's name: the variant (with its ``model.*`` overrides), then the trial's grid
    point, then each command-line override in ``cli`` that the point does not replace, as
    ``key=value`` with the key's last component; the task preset by its name alone.

    E.g. ``softmax n_train=64 seed=0 max_steps=50`` for the smoke grid's point
    ``model=softmax task.n_train=64 seed=0`` run with ``train.max_steps=50``.
    """
    point = [(k, v) for k, v in _pairs(trial.overrides) if _shown(k)]
    keys = {k for k, _ in _pairs(trial.overrides)}
    off_grid = [(k, v) for k, v in _pairs(cli) if _shown(k) and k not in keys and "," not in v
                and not v.startswith(("range(", "choice(", "glob("))]
    parts = [trial.variant] + [v if k == "task" else f"{k.rsplit('.', 1)[-1]}={v}"
                               for k, v in [*point, *off_grid]]
    return " ".join(parts)


def preset(variant: str) -> str:
    """The model preset of a variant name: ``softmax_free[k=4]`` → ``softmax_free``."""
    return variant.split("[", 1)[0]


def parent_name(ablation: str, started: datetime) -> str:
    """A parent run's name: its start time first, to the second, then the ablation
    (``12-01 14:03:07 smoke``), so the time is what the runs table shows even where it cuts the
    name; the year is in the table's *Created* column."""
    return f"{started:%m-%d %H:%M:%S} {ablation}"


VIEW_KEY = "harness"  # the saved view's share key: ?viewStateShareKey=harness
# The environment of an `mlflow ui` or `mlflow server` the harness prints or starts: MLflow 3.17
# otherwise runs a job runner for its GenAI jobs beside it (eight more processes, 20-40 CPU-s at
# each start on 2 cores), and the harness submits no MLflow job. The README's commands set it too.
UI_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
COLUMNS = ("metrics.`test/rel_mse`", "metrics.`test/acc`", "metrics.`val/best_error`",
           "params.`task.n_train`", "params.`seed`", "params.`train.lr`", "params.`train.max_steps`",
           "tags.`variant`", "tags.`task`")


def view_state_tag() -> tuple[str, str]:
    """The experiment tag of MLflow 3's shared view (``mlflow.sharedViewState.<key>``, what the
    UI's *Share* button writes; a link with ``viewStateShareKey=<key>`` opens it): the runs
    table with the headline metrics (``test/rel_mse``, ``test/acc``, ``val/best_error``) and the
    key params as columns. Column ids are MLflow's ``<type>.`<key>```.

    The view also sorts the runs by name (``orderByKey``, the UI's own key for its *Run Name*
    sort): MLflow nests child runs under a
    collapsed parent row (whose metric columns read "-") only when the table is sorted by start
    time, so sorted by name every trial is a row of its own, with its metrics, variant by
    variant (run names start with the variant; a parent's with its start time, first). MLflow
    3.17 restores ``runsExpanded`` from no shared view, and ignores the shared view where the
    link itself carries a search parameter (``orderByKey``, ``searchFilter``), so the order is
    set here, not in the link."""
    return f"mlflow.sharedViewState.{VIEW_KEY}", json.dumps({"selectedColumns": list(COLUMNS),
                                                             "orderByKey": "tags.`mlflow.runName`",
                                                             "orderByAsc": True})
