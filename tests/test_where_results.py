"""Where the results are (issue 47, item 5): ``--help`` ends each ablation's question at a
sentence or with "…" (before, every long question was cut mid-sentence after three lines)."""

from __future__ import annotations

import re

from harness.cli import CONF, HARNESS_USAGE, ablation_header, ablation_question, help_text, options


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


def test_the_header_parser_gives_fields_in_file_order(tmp_path):
    """One reader of an ablation file's header (``harness.cli.ablation_header``) for ``--help``
    (the ``Q`` field) and the report (every field but ``Parts``): a field is a ``# KEY`` line and
    the lines indented under it; Hydra's directive is not a field; a bare ``#`` ends a field."""
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation" / "x.yaml").write_text(
        "# @package _global_\n# Q: does it? One\n#    more line.\n# Parts (margins):\n"
        "#   C1 [deciding] a vs b\n#\n#   orphan after a bare line\n# Run: python -m harness\n"
        "ablation:\n  name: x\n# Q: not the header\n")
    fields = ablation_header("x", tmp_path)
    assert [(f.key, f.text) for f in fields] == [
        ("Q", "Q: does it? One more line."), ("Parts", "Parts (margins): C1 [deciding] a vs b"),
        ("Run", "Run: python -m harness")]
    assert ablation_question("x", tmp_path) == "does it? One more line."
    assert ablation_header("missing", tmp_path) == [] and ablation_question("missing", tmp_path) == ""


def test_every_part_line_of_a_header_is_in_its_parts_field():
    """The report prints every header field but ``Parts`` (the verdict tables show the parts):
    a part's line (``C8 [deciding] …``) under another field would be printed as its prose."""
    part = re.compile(r"\bC\d+b? \[(deciding|sanity|observation)\]")
    for name in options("ablation", CONF):
        fields = ablation_header(name)
        assert [f.key for f in fields].count("Q") == 1, name
        for field in fields:
            assert field.key == "Parts" or not part.search(field.text), (name, field.key)
