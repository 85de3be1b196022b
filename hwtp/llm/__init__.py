"""The OpenAI-compatible chat client behind the ``openai`` policy.

- :mod:`hwtp.llm.client`: :class:`~hwtp.llm.client.ChatClient` (async httpx, ``n`` fallback,
  concurrency, deadlines, key hygiene);
- :mod:`hwtp.llm.chat`: its records (sampling parameters, configuration, requests, completions);
- :mod:`hwtp.llm.retry`: retry timing (full-jitter backoff, ``Retry-After``);
- :mod:`hwtp.llm.cache`: the SQLite response cache.
"""
