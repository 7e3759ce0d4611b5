"""Real servers started by the tests: a two-node Ray cluster on localhost and an MLflow
tracking server on 127.0.0.1; and a load test of 200 trials finishing on busy CPUs."""

from __future__ import annotations

import time
from collections import Counter

import pytest

FAST = ["train.max_steps=30", "train.eval_every=15", "task.n_val=32", "task.n_test=64"]


@pytest.fixture()
def two_node_cluster():
    """A real two-node Ray cluster on localhost, one CPU per node; yields its address."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster.address
    cluster.shutdown()


@pytest.mark.slow
def test_sweep_on_a_two_node_cluster_logs_through_an_mlflow_server(tmp_path, two_node_cluster,
                                                                    mlflow_server_uri, run_cli):
    from mlflow.tracking import MlflowClient

    args = ["harness", "+ablation=smoke", "cluster=ray", f"cluster.address={two_node_cluster}",
            "tracking=server", f"tracking.uri={mlflow_server_uri}", *FAST, "train.max_steps=300"]
    proc = run_cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "joined Ray cluster at" in proc.stderr and "2 nodes" in proc.stderr
    client = MlflowClient(mlflow_server_uri)
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if "trial_id" in r.data.tags]
    assert len(children) == 18 and {r.info.status for r in children} == {"FINISHED"}
    nodes = Counter(r.data.tags["node"] for r in children)
    assert len(nodes) == 2, nodes  # trials landed on both nodes
    artifacts = {f.path for f in client.list_artifacts(children[0].info.run_id)}
    assert "model_state.pt" in artifacts
    assert not (tmp_path / "mlflow.db").exists()  # nothing local: all through the server


@pytest.mark.slow
def test_load_200_trials_on_busy_cpus_lose_no_run(tmp_path, run_cli):
    from mlflow.tracking import MlflowClient

    args = ["harness", "+ablation=load"]  # 200 two-step trials, one per CPU, both CPUs busy
    start = time.time()
    proc = run_cli(args, tmp_path)
    wall = time.time() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "locked" not in proc.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("load")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if "trial_id" in r.data.tags]
    assert len(children) == 200
    assert Counter(r.info.status for r in children) == {"FINISHED": 200}
    assert len({r.data.tags["trial_id"] for r in children}) == 200
    print(f"load: 200 trials in {wall:.1f} s wall")
