"""Test plans: the format (parse, validate, compile to simulator steps), the fast C-backed
reader of the reward path, plan values, and plans on disk."""
