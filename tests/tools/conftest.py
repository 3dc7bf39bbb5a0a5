"""Fixtures for the tools tests: every async scenario runs under asyncio and trio, through the suite's
`backend` and `run` fixtures (tests/conftest.py; see tests/README.md).
"""
