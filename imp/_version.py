"""The installed distribution's version, read from its metadata (for the modules that report it:
the OpenTelemetry tracer, the ACP agent's self-description), without importing the package root."""

from __future__ import annotations

import importlib.metadata

__all__ = ["version"]


def version() -> str:
    """imp's version as installed, or `0+unknown` when imported from a checkout never installed."""
    try:
        return importlib.metadata.version("imp")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
