"""The test tiers of tests/conftest.py: ``integration`` and ``e2e`` come from the fixtures a test
asks for, and a process started outside ``e2e`` fails the test."""

from __future__ import annotations


def test_the_tiers_are_marked_by_the_fixtures_and_a_process_fails_a_test_outside_e2e(request):
    """The tiers (tests/conftest.py): a test of a store, server, Ray or command is
    ``integration`` through its fixtures, never by hand; a process fixture makes a test ``e2e``;
    and outside ``e2e`` the start of a driver, Ray, a server or a daemon fails the test."""
    import subprocess

    from conftest import E2E_FIXTURES, INTEGRATION_FIXTURES, started_processes

    assert {"invoke", "migrated_store", "populated"} <= INTEGRATION_FIXTURES and E2E_FIXTURES <= INTEGRATION_FIXTURES
    assert {"shared_ray", "shared_mlflow_server", "run_cli"} <= E2E_FIXTURES
    for line in (["/venv/bin/python", "-m", "harness", "+ablation=smoke"], "/venv/bin/python -m mlflow server --port 5",
                 ["/venv/lib/python3.12/site-packages/ray/core/src/ray/raylet/raylet", "--node"],
                 ["/usr/lib/postgresql/16/bin/initdb", "-D", "x"], ["srun", "-N1", "true"]):
        assert started_processes(line), line
    for line in (["git", "rev-parse", "HEAD"], ["uname", "-p"], ["/venv/bin/python", "-c", "pass"]):
        assert started_processes(line) is None, line
    assert "e2e" not in request.node.keywords
    assert subprocess.Popen.__init__.__name__ == "watched"  # this test is watched, as every one outside e2e
