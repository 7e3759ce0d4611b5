"""The test tiers of tests/conftest.py: ``integration`` and ``e2e`` come from the fixtures a test
asks for, and a process started outside ``e2e`` fails the test."""

from __future__ import annotations


def test_the_tiers_are_marked_by_the_fixtures_and_a_process_fails_a_test_outside_e2e(request):
    """The tiers (tests/conftest.py): a test of a store, server, Ray or command is
    ``integration`` through its fixtures, never by hand; a process fixture makes a test ``e2e``;
    and outside ``e2e`` the start of a driver, Ray, a server or a daemon fails the test."""
    import subprocess

    from conftest import E2E_FIXTURES, INTEGRATION_FIXTURES, started_processes

    assert {"invoke", "populated"} <= INTEGRATION_FIXTURES and E2E_FIXTURES <= INTEGRATION_FIXTURES
    assert {"shared_ray", "shared_mlflow_server", "run_cli"} <= E2E_FIXTURES
    for line in (["/venv/bin/python", "-m", "harness", "+ablation=smoke"], "/venv/bin/python -m mlflow server --port 5",
                 ["/venv/lib/python3.12/site-packages/ray/core/src/ray/raylet/raylet", "--node"],
                 ["/usr/lib/postgresql/16/bin/initdb", "-D", "x"], ["srun", "-N1", "true"]):
        assert started_processes(line), line
    for line in (["git", "rev-parse", "HEAD"], ["uname", "-p"], ["/venv/bin/python", "-c", "pass"]):
        assert started_processes(line) is None, line
    assert "e2e" not in request.node.keywords
    assert subprocess.Popen.__init__.__name__ == "watched"  # this test is watched, as every one outside e2e


def test_each_worker_starts_on_its_share_of_the_long_tests_with_their_files_short_ones():
    """``long_tests_first`` (tests/conftest.py): under n workers, each worksteal share (the k-th
    of n: what is left // (n - k) tests) begins with long tests, longest first, dealt to the
    share with the least expected seconds; a long test takes its file's short tests along where
    they fit in the share (they share its module-scoped fixtures, built once); the other short
    tests fill the shares in file order; no test is lost or doubled. And every
    :data:`LONG_TESTS` entry names a test function that exists."""
    import ast
    from pathlib import Path
    from types import SimpleNamespace

    from conftest import LONG_TESTS, long_tests_first

    def item(file, name, seconds=0.0, slow=False):
        if seconds:
            LONG_TESTS[f"test_{file}.py::{name}"] = seconds
        return SimpleNamespace(path=Path(f"tests/test_{file}.py"), name=name, originalname=name,
                               keywords={"slow": True} if slow else {})

    saved = dict(LONG_TESTS)
    try:
        items = ([item("x", "x0"), item("x", "x1")] + [item("y", f"y{i}") for i in range(8)]
                 + [item("x", "a", 100), item("y", "b", 90), item("y", "c", 50), item("y", "d", 40),
                    item("y", "e", slow=True)])
        ordered = [i.name for i in long_tests_first(items, 3)]
        alone = [i.name for i in long_tests_first(items, 1)]
    finally:
        LONG_TESTS.clear()
        LONG_TESTS.update(saved)
    assert sorted(ordered) == sorted(i.name for i in items)
    # shares of 5 tests: a (100) with its file's x0, x1 | b (90): its file's eight short tests
    # do not fit beside it | c (50); d (40) joins c's share (50 is the least), then e (slow, 15)
    # the first of the least loaded: b's (90, tied with c + d); y0-y7 fill the shares in order
    assert ordered == ["a", "x0", "x1", "y0", "y1", "b", "e", "y2", "y3", "y4", "c", "d", "y5", "y6", "y7"]
    assert alone == ["a", "x0", "x1", "b"] + [f"y{i}" for i in range(8)] + ["c", "d", "e"]
    tests = Path(__file__).parent
    for key in LONG_TESTS:
        module, name = key.split("::")
        defined = {node.name for node in ast.walk(ast.parse((tests / module).read_text()))
                   if isinstance(node, ast.FunctionDef)}
        assert name in defined, key
