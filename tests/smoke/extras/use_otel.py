"""imp[otel]: OpenTelemetry instrumentation on the API alone (no SDK: spans go to the no-op provider)."""

from opentelemetry import trace

import imp
from imp.observe.otel import OtelSink, uninstrument_otel

imp.instrument_otel()
program = imp.predict("question -> answer", lm=imp.ScriptedLM([{"answer": "4"}, {"answer": "5"}]))
assert imp.call_sync(program, question="2+2?").answer == "4"
uninstrument_otel()
sink = OtelSink(tracer_provider=trace.get_tracer_provider())
assert imp.call_sync(program, question="2+3?", on_event=sink).answer == "5"
print("ok")
