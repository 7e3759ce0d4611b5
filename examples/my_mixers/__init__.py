"""Three sequence mixers that are not in the paper's family, for ``model=external`` (README.md)."""
