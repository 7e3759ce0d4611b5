"""The README starts with exactly two set-up commands, and CI runs the second one verbatim; its
Slurm section's time estimate is the one docs/scaling.md's figures give."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block, "README must open with a bash block of set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_two_commands_install_and_run():
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("python -m harness +ablation=smoke")
    assert "pytest" in commands[1] and "[test]" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _setup_commands()[1] in ci_lines


def test_readme_slurm_section_estimates_full_scale_from_docs_scaling():
    """The CPU estimate of ``scale=full`` in the README's Slurm section is docs/scaling.md's
    per-trial training cost (600 steps) times the suite's trials, scaled to full's steps; the GPU
    time reads "not measured" while benchmarks/RESULTS.md has no GPU figure; the section has the
    GPU flags and the check that the nodes' torch sees CUDA."""
    scaling = (ROOT / "docs" / "scaling.md").read_text()
    low, high = map(float, re.search(r"\| train \| ([\d.]+) s \(softmax[^)]*\) to ([\d.]+) s", scaling).groups())
    trials = int(re.search(r"`\+ablation=paper scale=full`, ([\d,]+) trials", scaling).group(1).replace(",", ""))
    steps = int(re.search(r"^steps: (\d+)$", (ROOT / "conf" / "scale" / "full.yaml").read_text(), re.M).group(1))
    hours = [f"{trials * cost * steps / 600 / 3600:.1f}".removesuffix(".0") for cost in (low, high)]
    readme = (ROOT / "README.md").read_text()
    slurm = " ".join(readme[readme.index("On a Slurm cluster"):readme.index("## Where results land")].split())
    assert f"{hours[0]}–{hours[1]} core-hours" in slurm and f"{trials:,} trials" in slurm, hours
    gpu_measured = "Not run on a GPU" not in (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert ("on GPUs: not measured" in slurm) != gpu_measured
    assert "cluster.device=cuda cluster.gpus_per_trial=" in slurm and "--gpus-per-node" in slurm
    assert 'python -c "import torch; print(torch.__version__, torch.cuda.is_available())"' in slurm
