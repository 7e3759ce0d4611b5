"""A throwaway git repository for the tests of what the report reads from git (the registration
trail of :mod:`analysis.reporting`, the frozen choices' commit of :mod:`analysis.confirm`): one
helper instead of a copy in each test file."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo`` (e.g. ``git(tmp_path, "init", "-q")``), its stdout stripped.

    Commits under a fixed identity: a CI machine or a fresh container may have none configured,
    and git then refuses to commit.

    Raises:
        subprocess.CalledProcessError: git exits non-zero.
    """
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()
