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


def test_each_worker_starts_on_its_share_of_the_long_tests_and_the_short_ones_keep_file_order():
    """``long_tests_first`` (tests/conftest.py): under n workers, each worksteal share (the k-th
    of n: what is left // (n - k) tests) begins with long tests, longest first, dealt to the
    share with the least expected seconds; the short tests fill the shares in file order; no test
    is lost or doubled. And every :data:`LONG_TESTS` entry names a test function that exists."""
    import ast
    from pathlib import Path
    from types import SimpleNamespace

    from conftest import LONG_TESTS, long_tests_first

    def item(name, seconds=0.0, slow=False):
        if seconds:
            LONG_TESTS[f"test_fake.py::{name}"] = seconds
        return SimpleNamespace(path=Path("tests/test_fake.py"), name=name, originalname=name,
                               keywords={"slow": True} if slow else {})

    saved = dict(LONG_TESTS)
    try:
        items = [item(f"s{i}") for i in range(10)] + [item("a", 100), item("b", 90), item("c", 50),
                                                     item("d", 40), item("e", slow=True)]
        ordered = [i.name for i in long_tests_first(items, 3)]
        alone = [i.name for i in long_tests_first(items, 1)]
    finally:
        LONG_TESTS.clear()
        LONG_TESTS.update(saved)
    assert sorted(ordered) == sorted(i.name for i in items)
    # shares of 5 tests: a (100) | b (90) | c (50); d (40) joins c's share (50 is the least), then
    # e (slow, 15) the first of the least loaded: b's (90, tied with c + d)
    assert ordered == ["a", "s0", "s1", "s2", "s3", "b", "e", "s4", "s5", "s6", "c", "d", "s7", "s8", "s9"]
    assert alone == ["a", "b", "c", "d", "e"] + [f"s{i}" for i in range(10)]
    tests = Path(__file__).parent
    for key in LONG_TESTS:
        module, name = key.split("::")
        defined = {node.name for node in ast.walk(ast.parse((tests / module).read_text()))
                   if isinstance(node, ast.FunctionDef)}
        assert name in defined, key
