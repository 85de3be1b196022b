"""Prompt templates (data): system.md, user.md, format.md."""
