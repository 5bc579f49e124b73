"""A second reader: other processes read the views over Arrow Flight while a job ingests.

DuckDB lets one process hold the state file, so a dashboard cannot open the state
while a job runs. Instead the process holding it serves reads:

* ``db.serve(port=0)`` (or ``ivm serve DIR --port N`` for state no job holds) starts
  an Arrow Flight server in a background thread and returns a ``Server`` (its
  ``location``, ``stop()``). Each request runs one read-only query over the state's
  tables and views (never a file or the host's environment:
  ``views.read_queries.check_served_query``) on a cursor of its own
  (``views.concurrency``: one per server thread, with the state's settings), so it sees
  the last committed epoch: an epoch being ingested meanwhile is invisible until it
  commits (DuckDB's snapshot isolation), and readers never wait for it, nor it for them;
* ``ivm.views.serving.Reader(location)`` (``ivm.reader(location)``) is the client:
  ``sql(query)``, ``read(name)`` and ``epoch`` return Arrow tables and ints over
  the wire, from any process or host.

The choice (rather than read-only copies published at every commit): nothing is
copied, a reader sees each epoch as soon as it commits, and the server is the only
thing that touches the state file. In Spark mode a request reads the partition files
on the driver (``db.sql``'s read: each file attached read-only), after the epoch in
flight if one is: it may wait for that epoch's Spark job, and it never sees it half
applied (a task writes its file before the driver commits).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from ivm.errors import IvmError, SqlError, StateError
from ivm.storage.catalog import META
from ivm.views.modes import spark_mode
from ivm.views.read_queries import check_served_query

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object

EPOCH = b"epoch"
"""The Flight action answering the state's last committed epoch."""


class _Flight(flight.FlightServerBase):
    """Answers ``do_get(ticket = SQL)`` with the query's rows, read at the last commit."""

    def __init__(self, session: Session, location: str) -> None:
        super().__init__(location)
        self.session = session

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        query = ticket.ticket.decode()
        try:
            check_served_query(query, [*self.session._tables, *self.session._views])
            if spark_mode(self.session):  # the files, once an epoch in flight is over
                table = self.session._engine.sql(query)
            else:
                table = self.session._reads.query(query)  # this thread's cursor, with the settings
        except IvmError as error:
            raise flight.FlightServerError(f"{type(error).__name__}: {error}") from error
        except Exception as error:  # noqa: BLE001 - DuckDB's words go back to the client
            raise flight.FlightServerError(f"SqlError: query failed: {error}") from error
        return flight.RecordBatchStream(table)

    def do_action(self, context: Any, action: flight.Action) -> Any:
        if action.type != EPOCH.decode():
            raise flight.FlightServerError(f"unknown action {action.type!r}")
        if spark_mode(self.session):
            epoch = self.session.epoch  # the driver's: advanced when an epoch commits
        else:
            epoch = self.session._catalog_epoch(self.session._reads.cursor())
        yield flight.Result(json.dumps(epoch).encode())


class Server:
    """A running Flight server of one session (``db.serve``)."""

    def __init__(self, server: _Flight) -> None:
        self._server = server
        self.location = f"grpc://127.0.0.1:{server.port}"
        """Where readers connect: ``Reader(server.location)``."""
        self._thread = threading.Thread(target=server.serve, daemon=True, name="ivm-serve")
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (readers' open requests end)."""
        self._server.shutdown()
        self._thread.join(timeout=10)

    def wait(self) -> None:
        """Serve until the process is interrupted (``ivm serve``)."""
        self._server.wait()


class Serving(_Base):
    """``serve`` of ``Session`` (see the module docstring)."""

    def serve(self, port: int = 0, host: str = "127.0.0.1") -> Server:
        """Serve read-only SQL over Arrow Flight to other processes while this one ingests:
        each request sees the last committed epoch. ``port=0`` picks a free port
        (``Server.location`` says which); ``host="0.0.0.0"`` serves other hosts.
        Clients: ``ivm.views.serving.Reader``. Both modes (``views.serving``)."""
        self._check_open()
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise IvmError(f"serve: port must be an integer from 0 to 65535, not {port!r}")
        server = Server(_Flight(self, f"grpc://{host}:{port}"))
        self._on_close_actions.append(server.stop)
        return server

    def _catalog_epoch(self, cursor: Any) -> int:
        """The epoch committed in the state, read through ``cursor``."""
        return int(cursor.execute(f"SELECT epoch FROM {META}").fetchall()[0][0])


class Reader:
    """A client of ``db.serve``: reads the views from another process or host."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._client = flight.connect(location)

    def sql(self, query: str) -> pa.Table:
        """Run a read-only query at the server's last committed epoch."""
        try:
            return self._client.do_get(flight.Ticket(query.encode())).read_all()
        except flight.FlightError as error:
            raise _error(error) from None

    def read(self, name: str) -> pa.Table:
        """A view's (or table's) contents at the last committed epoch."""
        return self.sql(f'SELECT * FROM "{name.replace(chr(34), chr(34) * 2)}"')

    @property
    def epoch(self) -> int:
        """The last epoch the server's state committed."""
        try:
            results = list(self._client.do_action(flight.Action(EPOCH.decode(), b"")))
        except flight.FlightError as error:
            raise _error(error) from None
        return int(json.loads(results[0].body.to_pybytes()))

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error(error: Exception) -> IvmError:
    """The server's error as the IvmError it was (its class named first), else StateError."""
    text = str(error).split(". Detail:")[0]
    for kind in (SqlError,):
        prefix = f"{kind.__name__}: "
        if prefix in text:
            return kind(text.split(prefix, 1)[1])
    return StateError(f"ivm server: {text}")
