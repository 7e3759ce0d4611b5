"""Analysis of recorded runs: MLflow → tidy DataFrame → seaborn figures and tables."""
