"""The trajectory ReAct tests run every scenario under asyncio and trio, through the suite's `run`
fixture (tests/conftest.py; see tests/README.md)."""
