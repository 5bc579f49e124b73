"""A job's rows brought to the driver as Arrow, one batch at a time, so that the driver can
stop before they pass what it may hold.

``DataFrame.toArrow`` reads every batch the job sends into a list and only then returns:
a change too large for the driver has filled its memory before anyone can weigh it.
``collect_arrow`` reads the same stream one batch at a time and hands each batch to
``admit`` before keeping it. ``admit`` raises to refuse (the memory limit,
``ivm.views.resources``); the read stops there, the job is cancelled, what was read is
dropped, and the refusal is raised. What a refused epoch's tasks already wrote is the
caller's to roll back, as after any failed job.

The stream is PySpark's own for ``toArrow`` (``Dataset.collectAsArrowToPython``): the JVM
runs the job in a thread of its own and writes each partition's Arrow batches to a local
socket as soon as the partition is done, then ends the Arrow stream and writes the
batches' order (a count, then the indices), or ``-1`` and the job's error. The order is
read but not restored (the epoch's rows are sorted out by a tag column). This module and
``toArrow`` share that protocol; it is the one place ivm reads it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

import pyarrow as pa
from pyspark.errors import PySparkRuntimeError
from pyspark.errors.exceptions.captured import unwrap_spark_exception
from pyspark.java_gateway import local_connect_and_auth
from pyspark.serializers import UTF8Deserializer, read_int
from pyspark.sql import DataFrame
from pyspark.traceback_utils import SCCallSiteSync


def collect_arrow(frame: DataFrame, admit: Callable[[pa.RecordBatch], None]) -> pa.Table:
    """``frame``'s rows on the driver (in no particular order), each batch given to ``admit``
    before it is kept; an exception ``admit`` raises stops the read and cancels the job."""
    context = frame.sparkSession.sparkContext
    tag = f"ivm-collect-{uuid.uuid4().hex}"
    context.addJobTag(tag)  # the JVM's serving thread inherits it, and so does its job
    try:
        with SCCallSiteSync(context):
            port, secret, server = frame._jdf.collectAsArrowToPython()  # noqa: SLF001
    finally:
        context.removeJobTag(tag)
    batches: list[pa.RecordBatch] = []
    try:
        schema, failure = _read(port, secret, admit, batches)
    except BaseException:
        context.cancelJobsWithTag(tag)
        with contextlib.suppress(Exception):  # the job's end: cancelled, or a closed socket
            server.getResult()
        raise
    with unwrap_spark_exception():
        server.getResult()  # the job's own failure, raised as toArrow raises it
    if failure is not None:
        raise PySparkRuntimeError(
            errorClass="ERROR_OCCURRED_WHILE_CALLING",
            messageParameters={"func_name": "collect_arrow", "error_msg": failure},
        )
    return pa.Table.from_batches(batches, schema=schema)


def _read(
    port: int, secret: str, admit: Callable[[pa.RecordBatch], None],
    batches: list[pa.RecordBatch],
) -> tuple[pa.Schema, str | None]:
    """Read the stream's batches into ``batches`` (each admitted first); returns its schema
    and the job's error message if the JVM sent one instead of the batches' order."""
    sockfile, sock = local_connect_and_auth(port, secret)
    sock.settimeout(None)  # a job takes as long as it takes
    try:
        reader = pa.ipc.open_stream(sockfile)
        for batch in reader:
            admit(batch)
            batches.append(batch)
        count = read_int(sockfile)
        if count == -1:
            return reader.schema, UTF8Deserializer().loads(sockfile)
        for _ in range(count):  # the batches' order, not needed: read to the end all the same
            read_int(sockfile)
        return reader.schema, None
    finally:
        sockfile.close()
        sock.close()
