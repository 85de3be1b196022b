"""The OpenAI-compatible chat client behind the ``openai`` policy.

- :mod:`hwtp.policy.llm.client`: :class:`~hwtp.policy.llm.client.ChatClient` (async httpx, ``n`` fallback,
  concurrency, deadlines, key hygiene);
- :mod:`hwtp.policy.llm.chat`: its records (sampling parameters, configuration, requests, completions);
- :mod:`hwtp.policy.llm.retry`: retry timing (full-jitter backoff, ``Retry-After``);
- :mod:`hwtp.policy.llm.cache`: the SQLite response cache.
"""
