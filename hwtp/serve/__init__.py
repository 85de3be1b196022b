"""``hwtp serve``: the reward service.

Modules: :mod:`~hwtp.serve.app` (the Starlette application and its routes),
:mod:`~hwtp.serve.protocol` (OpenRLHF and NeMo Gym bodies parsed and answered),
:mod:`~hwtp.serve.batcher` (scoring in threads, concurrent requests merged),
:mod:`~hwtp.serve.limits` (size, items, concurrency, queue, time), :mod:`~hwtp.serve.metrics`,
:mod:`~hwtp.serve.server` (uvicorn and the graceful stop). Starlette and uvicorn come with the
``serve`` extra; importing this package alone needs neither.
"""
