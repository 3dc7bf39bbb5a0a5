"""Fixtures of the installed-package smoke suite (tests/smoke/smoke_support.py has the helpers)."""

from smoke_support import dist, environments

__all__ = ["dist", "environments"]
