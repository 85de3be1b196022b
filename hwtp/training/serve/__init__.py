"""``hwtp serve``: the reward service.

Modules: :mod:`~hwtp.training.serve.app` (the Starlette application and its routes),
:mod:`~hwtp.training.serve.protocol` (OpenRLHF and NeMo Gym bodies parsed and answered),
:mod:`~hwtp.training.serve.batcher` (scoring in threads, concurrent requests merged),
:mod:`~hwtp.training.serve.limits` (size, items, concurrency, queue, time), :mod:`~hwtp.training.serve.metrics`,
:mod:`~hwtp.training.serve.server` (uvicorn and the graceful stop). Starlette and uvicorn come with the
``serve`` extra; importing this package alone needs neither.
"""
