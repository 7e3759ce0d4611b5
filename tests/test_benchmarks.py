"""The benchmark commands that no other test runs still run: the GPU command (on a CPU, its
eager arms, as a check that a GPU machine can run it as is) and the packed-training arms of
``benchmarks/pack_limit.py``. Their figures are measured apart (``benchmarks/RESULTS.md``);
these tests assert only that each arm runs and what it writes."""

from __future__ import annotations

import math

import pytest
from hydra.core.global_hydra import GlobalHydra

from benchmarks import gpu, pack_limit


def test_the_gpu_command_runs_on_a_cpu_and_writes_only_its_section(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\nhand-written text\n")
    GlobalHydra.instance().clear()  # the command initialises Hydra itself
    assert gpu.main(["--device", "cpu", "--packs", "2", "--steps", "2", "--budget-s", "120", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Benchmark results\n\nhand-written text\n")
    section = text[text.index(gpu.START):text.index(gpu.END)]
    assert "| lone | 1 | no |" in section and "| pack | 2 | no |" in section
    assert "Not run on a CPU (CUDA graphs need CUDA): pack 2 compiled." in section
    assert "not GPU figures" in section and "budget" not in section.split("|")[-1]
    row = next(line for line in section.splitlines() if line.startswith("| 2 | "))  # end to end, pack 2
    parts = [float(v) for v in row.strip("| ").split(" | ")[1:]]
    # each figure is printed to 0.1: the five parts' sum and the printed total differ by up to 6 × 0.05
    assert len(parts) == 6 and all(v > 0 for v in parts) and parts[-1] == pytest.approx(sum(parts[:-1]), abs=0.3 + 1e-9)


@pytest.mark.parametrize("packs", ["0", "2,", "abc"])
def test_the_gpu_command_refuses_bad_pack_sizes_before_it_runs(packs, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu.main(["--device", "cpu", "--packs", packs, "--out", str(tmp_path / "r.md")])
    assert stop.value.code == 2 and f"{packs!r}: give pack sizes as positive integers" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()


def test_the_pack_limit_arms_run_on_a_pack_of_two_seeds(hydra_conf):
    """Each arm on a pack of seeds 0 and 1 (their own validation and test sets): the harness,
    the bare pack with and without the evaluation schedule, and with its setup timed."""
    cache: dict = {}
    figures = [pack_limit.harness_arm(2, 3), pack_limit.bare_arm(2, 3, False, False, cache),
               pack_limit.bare_arm(2, 3, True, False, cache), pack_limit.bare_setup_arm(2, 3)]
    assert all(math.isfinite(ms) and ms > 0 for ms in figures), figures
