"""Where the results are (issue 47, item 5): ``--help`` ends each ablation's question at a
sentence or with "…" (before, every long question was cut mid-sentence after three lines)."""

from __future__ import annotations

from harness.cli import CONF, HARNESS_USAGE, ablation_question, help_text, options


def test_help_ends_each_question_at_a_sentence_or_with_an_ellipsis():
    text = help_text(HARNESS_USAGE)
    block = text[text.index("Ablations"):text.index("Config groups")].splitlines()[1:]
    entries: list[list[str]] = []
    for line in block:
        if not line.strip():
            continue
        if not line.startswith("   "):  # a new ablation's first line
            entries.append([line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""])
        else:
            entries[-1].append(line.strip())
    names = options("ablation", CONF)
    assert len(entries) == len(names)
    for name, lines in zip(names, entries):
        shown = " ".join(lines)
        assert shown.rstrip().endswith((".", "?", "!", ")", "…")), (name, shown)
        assert ablation_question(name).startswith(shown.rstrip(" …")), name
