"""One analysis path: what ``python -m analysis`` writes and prints, and the end-of-sweep summary
that ``python -m harness`` prints, are the same code on the same runs.

:func:`analyse` reads the runs of exactly the trials an ablation and its overrides compose to
(:func:`analysis.trials.restrict`: runs made with other overrides in the same experiment, e.g.
another ``train.max_steps``, are never pooled in) and writes every figure and table of
:func:`analysis.outputs.write_all`; each run's arm names every swept value, so runs that differ
in any configured value are never averaged together. :func:`summary_table` is the printed table:
one row per task × arm, the metric named, the mean test error at each training-set size, and the
runs used and left out. A run counts as diverged only by its ``diverged`` tag (training loss
became non-finite); an undefined summary such as ``val/best_error_at_80`` after a single
evaluation (listed in the ``nonfinite`` tag) is not a divergence.
"""

from __future__ import annotations

import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Sequence

import pandas as pd

from analysis import curves, render, reuse, tables
from analysis.load import load_runs, stamped_sqlite
from analysis.trials import restrict, swept_axes

if TYPE_CHECKING:
    from harness.store import Store
    from harness.expansion import Trial

COUNTS = ("used", "failed", "killed", "diverged")
PLOT = "sample_efficiency.png"
# parent-run tag: the digest (analysis.reuse.digest) of the runs and drawing the figures logged to
# that run were drawn from; a no-op resume looks it up instead of drawing them again
STAMP_TAG = "summary_inputs_sha256"


def analyse(name: str, trials: Sequence[Trial], store_uri: str, out: Path, *, scale: str | None = None,
            figures: Sequence[str] | None = None, runs_csv: bool = False) -> tuple[pd.DataFrame, list[Path]]:
    """The runs of exactly ``trials`` of ablation ``name`` in the store at ``store_uri``, and the
    paths of every figure and table of them written to ``out`` (none if there is no run).

    Raises:
        LookupError: as :func:`analysis.trials.restrict` (the runs lack a ``trial_id``).
    """
    df = restrict(load_runs(name, store_uri), trials, name)
    if df.empty:
        return df, []
    from analysis.outputs import write_all  # matplotlib: only where figures are drawn

    return df, write_all(df, out, **drawing(name, trials, store_uri, scale, figures, runs_csv))


def drawing(name: str, trials: Sequence[Trial], store_uri: str, scale: str | None = None,
            figures: Sequence[str] | None = None, runs_csv: bool = False) -> dict[str, Any]:
    """The keyword arguments of :func:`analysis.outputs.write_all` for ablation ``name``'s
    ``trials`` (those of :func:`analyse`; the figures' digest covers them). ``figures``
    defaults to the ablation's own (``ablation.figures`` of the trials' config), so the
    end-of-sweep summary and ``python -m analysis`` draw the same ones."""
    if figures is None:
        figures = list(trials[0].config.ablation.figures) if trials else []
    return dict(tracking_uri=store_uri, runs_csv=runs_csv, ablation=name, scale=scale,
                axes=swept_axes(trials), figures=figures)


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per task × arm of the runs ``df`` (:func:`analysis.curves.prepare`'s contract):
    ``task``, ``arm``, ``metric`` (what ``error`` is: test relative MSE or 1 − test accuracy),
    ``lr`` (chosen on validation), ``error_n<N>`` (+ ``_lo``/``_hi``, :data:`analysis.render_tables.SAMPLE_EFFICIENCY_CAPTION`)
    and the counts :data:`COUNTS`. Empty if no usable run has an error."""
    data = curves.prepare(df)
    if curves.usable(data).empty:
        return pd.DataFrame()
    full = tables.sample_efficiency_table(data)
    metric = data.groupby("task", dropna=False)["error_name"].first()
    full.insert(2, "metric", full["task"].map(metric))
    keep = ["task", "arm", "metric", *(c for c in full.columns if c == "lr" or c.startswith("error_n")),
            *COUNTS]
    return full[[c for c in keep if c in full]]


def format_table(table: pd.DataFrame) -> str:
    """``table`` as printed text: each estimate with its interval (:func:`analysis.render.for_markdown`)."""
    return render.for_markdown(table).to_string(index=False)


def report(df: pd.DataFrame, out: Path) -> Path | None:
    """Print :func:`summary_table` of ``df`` and write it to ``out/sample_efficiency.csv``;
    ``None`` (and a line on stderr) if no usable run has an error."""
    table = summary_table(df)
    if table.empty:
        print("no finished trial with test/rel_mse or test/acc: no table", file=sys.stderr)
        return None
    print(format_table(table))
    Path(out).mkdir(parents=True, exist_ok=True)  # a no-op resume that reuses its figures drew none
    path = Path(out) / "sample_efficiency.csv"
    table.to_csv(path, index=False)
    return path


def summarise(ablation: str, trials: Sequence[Trial], store: Store, parent: str,
              out_dir: Path, scale: str | None = None, figures: Sequence[str] | None = None,
              lease_s: float | None = None) -> None:
    """The end-of-sweep summary of ``python -m harness``: the runs, figures and table of
    :func:`analyse` and :func:`report` on the sweep's ``trials``, exactly what ``python -m
    analysis`` with the same overrides writes and prints.

    A sweep that recorded trials draws into ``out_dir`` and logs every file, with the stamp of
    :mod:`analysis.reuse`, as artifacts of its parent run ``parent``, which it tags
    :data:`STAMP_TAG`; the printed plot location is, on a file store, the file in ``out_dir``
    (``outputs/…``, as the README names it) and its logged copy, on a server its artifact URI
    in the store (under a Ray job, ``out_dir`` lies in Ray's temporary working directory). A no-op resume (``parent``
    empty: every trial had finished, no run was written) writes nothing to the store: it prints
    the table (written to ``out_dir``) and the figures of the latest parent run stamped with the
    same digest (:func:`recorded_figures`), or, where none is (e.g. a run changed since), draws
    them into ``out_dir``; on a SQLite store it reads by SQL and imports no MLflow.
    ``lease_s``: the sweep's ``tracking.lease_s``, the longest a write waits for a store that
    another process holds write-locked (None: :data:`harness.leases.LEASE_S`).
    """
    df = restrict(load_runs(ablation, store.uri), trials, ablation)
    how = drawing(ablation, trials, store.uri, scale, figures)
    if not parent:
        _no_op(ablation, df, how, store, out_dir)
        return
    from harness.tracking import Tracker  # MLflow: the figures are logged to the parent run

    # the sweep's lease: how long its writes wait for a store another process holds write-locked
    tracker = Tracker(store) if lease_s is None else Tracker(store, lease_s)
    paths = _draw(ablation, df, out_dir, how) if not df.empty else []
    table = report(df, out_dir) if not df.empty else None
    stamp = out_dir / reuse.STAMP
    for path in [*paths, *([table] if table else []), *([stamp] if paths else [])]:
        tracker.log_artifact(parent, path)
    if paths:  # last: the tag promises that the stamp and every file it lists are logged
        tracker.client.set_tag(parent, STAMP_TAG, reuse.read_stamp(stamp.read_text())[0])
    info = tracker.client.get_run(parent).info
    if any(p.name == PLOT for p in paths):  # a file store: the outputs/ file the README names;
        # a server: its artifact (under a Ray job, out_dir lies in the job's temporary folder)
        print(f"plot: {_shown(out_dir / PLOT)} (logged to the parent run: {info.artifact_uri}/{PLOT})"
              if store.artifact_root is not None else f"plot: {info.artifact_uri}/{PLOT}")
    print(f"records: {store.uri} (experiment {ablation!r}, parent run {parent})\n"
          f"browse: {ui_link(store, info.experiment_id)}")


def _draw(ablation: str, df: pd.DataFrame, out_dir: Path, how: dict[str, Any]) -> list[Path]:
    """The figures (:func:`analysis.reuse.write_once`); one that fails to draw after every trial
    finished is one warning line, not the sweep's failure: the trials are recorded, the exit
    status stays theirs, and ``python -m analysis`` redraws the figures. Returns the files
    written (none if drawing failed)."""
    try:
        return reuse.write_once(df, out_dir, **how)
    except Exception as err:  # noqa: BLE001 - any drawing error: the trials' results stand
        why = (str(err).strip().splitlines() or [""])[0]
        print(f"warning: the figures of {ablation!r} were not drawn ({type(err).__name__}: {why}); the trials "
              f"are recorded; python -m analysis +ablation={ablation} redraws them", file=sys.stderr)
        return []


def _no_op(ablation: str, df: pd.DataFrame, how: dict[str, Any], store: Store, out_dir: Path) -> None:
    """:func:`summarise` of a no-op resume: nothing is written to the store."""
    from harness.store import experiments

    experiment_id = experiments(store, [ablation]).get(ablation, (None,))[0]
    plot = None
    if not df.empty:
        found = experiment_id and recorded_figures(store.uri, experiment_id, reuse.digest(df, **how))
        if found:
            plot = f"{found[0]}/{PLOT}" if PLOT in found[1] else None
        else:
            paths = _draw(ablation, df, out_dir, how)
            plot = str(out_dir / PLOT) if out_dir / PLOT in paths else None
        report(df, out_dir)
    if plot:
        print(f"plot: {plot}")
    if experiment_id is not None:
        print(f"records: {store.uri} (experiment {ablation!r}; nothing new recorded)\n"
              f"browse: {ui_link(store, experiment_id)}")


def recorded_figures(store_uri: str, experiment_id: str, key: str) -> tuple[str, set[str]] | None:
    """The artifact URI and the logged file names of the latest parent run of experiment
    ``experiment_id`` tagged :data:`STAMP_TAG` = ``key`` that still holds its stamp
    (:data:`analysis.reuse.STAMP`); ``None`` if there is none. Reads only: one search, and one
    listing of each candidate's artifacts; on a SQLite store by SQL and from the artifact
    folders (:func:`analysis.load.stamped_sqlite`), elsewhere with MLflow's client. The tag is
    set only once the stamp and every file it lists are logged (:func:`summarise`)."""
    found = None
    if store_uri.startswith("sqlite:///"):
        found = stamped_sqlite(store_uri, experiment_id, STAMP_TAG, key)
    if found is None:
        found = _stamped_mlflow(store_uri, experiment_id, key)
    return next(((uri, logged) for uri, logged in found if reuse.STAMP in logged), None)


def _stamped_mlflow(store_uri: str, experiment_id: str, key: str) -> list[tuple[str, set[str]]]:
    """:func:`recorded_figures`' candidates read with MLflow's client: ``(artifact URI, logged
    file names)`` of up to 10 stamped parent runs, newest first (one whose artifacts cannot be
    read is left out)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store_uri)
    runs = client.search_runs([experiment_id], f"tags.role = 'sweep' AND tags.{STAMP_TAG} = '{key}'",
                              max_results=10, order_by=["attributes.start_time DESC"])
    found = []
    for run in runs:
        try:
            found.append((run.info.artifact_uri,
                          {PurePosixPath(f.path).name for f in client.list_artifacts(run.info.run_id)}))
        except (MlflowException, OSError):  # its artifacts cannot be read: look further
            continue
    return found


def _shown(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it (``outputs/…``, as the
    README names the folder), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def mlflow_command() -> str:
    """The ``mlflow`` that runs as printed: the one beside this Python (a venv's
    ``.venv/bin/mlflow``, relative to the working directory where it lies below it, as the
    README gives it), else ``mlflow`` (on PATH)."""
    beside = Path(sys.executable).parent / "mlflow"
    return _shown(beside) if beside.is_file() else "mlflow"


def ui_link(store: Store, experiment_id: str) -> str:
    """Where the MLflow UI shows an experiment's training runs (MLflow 3 opens its GenAI pages
    unless the URL asks for ``workflowType=machine_learning``), in the saved view whose columns
    are the headline metrics and key params (:func:`harness.naming.view_state_tag`). For a file
    store, the ``mlflow ui`` command that serves it, as the README gives it, in the environment
    :data:`harness.naming.UI_ENV` (no MLflow job runner)."""
    from harness.naming import UI_ENV, VIEW_KEY

    # the shared view is read on the runs page itself (from #/experiments/ID it is dropped)
    page = f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    if store.artifact_root is None:  # a tracking server serves the UI itself
        return f"{store.uri}/{page}"
    env = " ".join(f"{key}={value}" for key, value in UI_ENV.items())
    return f"{env} {mlflow_command()} ui --backend-store-uri {store.uri} --port 5000, then http://127.0.0.1:5000/{page}"
