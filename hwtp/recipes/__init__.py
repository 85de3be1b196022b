"""Entry points that run a trainer's own code with hwtp's groups (see docs/how-to/training.md, "GRPO-SMu
advantages in the trainer"). Each module imports its trainer; nothing here is imported by hwtp."""
