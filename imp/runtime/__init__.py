"""The runtime: deadlines, usage accounting, runs and events."""
