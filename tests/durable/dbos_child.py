"""The DBOS side of a crash-test child: DBOS on a SQLite file or on Postgres, and its journal."""

from __future__ import annotations

from typing import Any


def dbos_journal(kind: str, url: str) -> Any:
    """Launch DBOS on `url` (`kind` is dbos-sqlite or dbos-postgres) and return an imp DBOSJournal."""
    import imp.durable.dbos as imp_dbos

    if kind == "dbos-sqlite":
        imp_dbos.bundled_sqlite()  # the Python here links SQLite 3.40; DBOS needs 3.42
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSONSerializer

    DBOS(
        config={
            "name": "imp-crash",
            "system_database_url": url,
            "serializer": DBOSPortableJSONSerializer(),
            "run_admin_server": False,
        }
    )
    journal = imp_dbos.DBOSJournal()
    DBOS.launch()
    return journal
