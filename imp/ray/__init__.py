"""`imp.evaluate` and `imp.parallel` beyond one machine: `imp.ray.evaluate` and `imp.ray.map` on Ray workers.

```python
ray.init(address="auto")
report = await imp.ray.evaluate(program, devset, metric, workers=8, limits=imp.ray.Limits(requests_per_second=50))
```

Needs the optional extra `imp[ray]`; `import imp` never loads Ray. Rooms: `_api` (the two
functions, their checks and what they return), `_run` (the driver: workers, batches, the retry
of a dead worker's batch), `_worker` (the actor that runs batches), `_limits` (the shared rate,
concurrency and pauses), `_rows` (what travels back).
"""

try:
    from ray import remote as _remote  # noqa: F401  (only to say clearly what is missing)
except ImportError as exc:
    raise ImportError("imp.ray needs Ray: pip install 'imp[ray]'") from exc

from imp.ray._api import evaluate, map
from imp.ray._limits import Limits
from imp.ray._rows import RemoteError, WorkerLost, WorkerStartError

__all__ = ["Limits", "RemoteError", "WorkerLost", "WorkerStartError", "evaluate", "map"]
