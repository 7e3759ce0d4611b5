"""``benchmarks/RESULTS.md``'s generated sections: each benchmark command owns one section between
its own two HTML comment markers and rewrites only that, leaving the hand-written passes and the
other commands' sections as they are."""

from __future__ import annotations

from pathlib import Path


def write_section(out: Path, start: str, end: str, title: str, text: str) -> None:
    """Replace the section between ``start`` and ``end`` in ``out`` (a Markdown file, created
    with a ``# Benchmarks`` heading if missing) by ``title`` and ``text``; append it if absent."""
    old = out.read_text() if out.exists() else "# Benchmarks\n"
    section = f"{start}\n{title}\n\n{text}\n{end}"
    if start in old and end in old:
        new = old[:old.index(start)] + section + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    out.write_text(new)
