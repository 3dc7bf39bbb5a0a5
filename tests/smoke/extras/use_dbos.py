"""imp[dbos]: DBOS's SQLite check, and the SQLite pysqlite3-binary brings where the Python links an older one."""

import imp.durable.dbos as imp_dbos

version = imp_dbos.bundled_sqlite()
assert tuple(int(part) for part in version.split(".")[:2]) >= (3, 42), version
imp_dbos.check_sqlite("sqlite:///runs.sqlite")  # passes now that this process's sqlite3 is new enough
print("ok")
