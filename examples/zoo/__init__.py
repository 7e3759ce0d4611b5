"""The mixer zoo: well-known sequence mixers written from their papers, for ``model=external`` (issue 50)."""
