"""Bring your own designs: ``hwtp designs import`` (``sources.py`` finds candidates,
``importer.py`` checks and writes them) and deterministic splits by content (``splits.py``)."""
