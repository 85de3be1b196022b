"""The plan stage: policies (offline, an OpenAI-compatible endpoint), their prompts and the
HTTP client, and ``hwtp plan``'s writing of G plans per state."""
