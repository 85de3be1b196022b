"""``hwtp run``: the resumable loop over designs (mutate, plan, score, advantage, export), its
configuration and its SQLite store."""
