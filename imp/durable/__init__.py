"""Runs that outlive their process: the journal (record and replay a run's steps), sessions.

Above `programs/`: it records what programs do. The layers below reach it only through the hook in
`imp.runtime.journal` (a context variable they read), never by import. `imp.dbos` (the `dbos` extra)
keeps the same steps as DBOS steps, on Postgres for more than one machine.
"""

from imp.durable._scope import Scope
from imp.durable._sessions import SQLiteSessions
from imp.durable._sqlite import JournalRun, JournalStep, SQLiteJournal
from imp.errors import JournalError, JournalMismatch
from imp.runtime.journal import idempotency_key

__all__ = [
    "JournalError",
    "JournalMismatch",
    "JournalRun",
    "JournalStep",
    "SQLiteJournal",
    "SQLiteSessions",
    "Scope",
    "idempotency_key",
]
