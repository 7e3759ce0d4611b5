"""The finite information principle, structurally (paper.md §7, claim C6).

Words over ``{Y (k×n), T = Yᵀ (n×k), W (k×k)}``: a product is admissible as a term of ``g(Y)``
only if it is ``n×n`` for every ``n`` with parameters whose shapes do not depend on ``n``. The
shapes force such a word to alternate as ``Yᵀ B_1 (YYᵀ) B_2 ··· B_p Y`` with ``B_j = W^m``,
i.e. to have an even number (≥ 2) of Y factors: no constant or linear term.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

SHAPES = {"Y": ("k", "n"), "T": ("n", "k"), "W": ("k", "k")}  # T stands for Yᵀ
ALTERNATING = re.compile(r"^TW*(YTW*)*Y$")  # Yᵀ B_1 (YYᵀ) B_2 ··· B_p Y


def word_shape(word: str) -> tuple[str, str] | None:
    """Shape of a product such as ``"TWY"`` (= YᵀWY) as symbols ``(rows, cols)``, or ``None``
    if it is not defined for every ``n`` (``k`` and ``n`` are independent symbols)."""
    rows, cols = SHAPES[word[0]]
    for factor in word[1:]:
        r, c = SHAPES[factor]
        if r != cols:
            return None
        cols = c
    return rows, cols


def enumerate_terms(max_factors: int = 6) -> dict[str, object]:
    """Every word of up to ``max_factors`` factors that is ``n×n`` for every ``n``.

    Returns:
        ``{"words": [...], "y_counts": Counter(number of Y/Yᵀ factors → words),
        "all_even_alternating": bool}``: the last is C6's statement, checked word by word.
    """
    words = [w for length in range(1, max_factors + 1)
             for w in map("".join, itertools.product("YTW", repeat=length))
             if word_shape(w) == ("n", "n")]
    y_counts = Counter(w.count("Y") + w.count("T") for w in words)
    ok = all((w.count("Y") + w.count("T")) % 2 == 0 and ALTERNATING.match(w) for w in words)
    return {"words": words, "y_counts": y_counts, "all_even_alternating": ok and y_counts[0] == 0
            and y_counts[1] == 0}
