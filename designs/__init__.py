"""Shipped designs (data): one folder each with ``design.yaml``, ``spec.md``, RTL and plans."""
