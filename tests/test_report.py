"""The report command end to end at the tiny scale: runs the paper suite, writes the report."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_report_command_runs_the_suite_and_writes_every_claim(tmp_path, run_cli):
    proc = run_cli(["analysis.report", "scale=tiny", "report.out=out/report.md"], tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (tmp_path / "out" / "report.md").read_text()
    for claim in ("C1", "C2", "C3", "C4", "C5", "C5b", "C6", "C7", "C8", "C9", "C10", "C11", "C12"):
        assert f"| {claim} |" in report
    assert "**Scale: `tiny`**" in report
    assert "How verdicts are decided" in report
    figures = list((tmp_path / "out" / "report").glob("*/sample_efficiency.png"))
    assert len(figures) == 11
    assert (tmp_path / "out" / "report" / "finite_information" / "length_generalisation.png").exists()
    # a second invocation resumes: nothing is trained again
    again = run_cli(["analysis.report", "scale=tiny", "report.out=out/report.md"], tmp_path, timeout=900)
    assert again.returncode == 0
    assert "0 finished now" in again.stdout and "finished now" in again.stdout
