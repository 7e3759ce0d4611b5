"""Harness testing Ma & Ying (2022): configs, sweep expansion, trials, scheduling, tracking."""
