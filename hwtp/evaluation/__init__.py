"""``hwtp eval``: a policy on held-out designs, reported the way GRPO-SMu reports it
(``runner.py`` the evaluation, ``metrics.py`` the estimators, ``render.py`` Markdown and the
side-by-side comparison)."""
