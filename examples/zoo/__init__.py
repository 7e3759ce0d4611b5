"""The mixer zoo: well-known sequence mixers written from their papers, named by import path
(``model=external model.target=zoo.<module>:<Class>``) and scored by ``python -m analysis.zoo``."""
