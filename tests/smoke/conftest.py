"""Fixtures of the installed-package smoke suite (tests/smoke/smoke_support.py has the helpers)."""

from smoke_support import dist, environments, outside, page_runs

__all__ = ["dist", "environments", "outside", "page_runs"]
