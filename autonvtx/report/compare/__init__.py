"""Comparing profiles: many files read into summaries, `diff` between runs, `--across ranks` and the straggler."""
