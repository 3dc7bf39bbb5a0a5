"""Seeing a run: OpenTelemetry spans (`imp.observe.otel`, the `otel` extra) and a run as an HTML page.

Nothing here is imported by `import imp`; `imp.instrument_otel` and `imp.trace_html` load their
module on first use, so a process without the extra never imports OpenTelemetry.
"""

from imp.observe.recorder import Recorder

__all__ = ["Recorder"]
