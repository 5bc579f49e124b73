"""The session's engines (``views.engine``): both modes implement the one protocol, and a
session is a ``Session`` whatever its mode."""

from __future__ import annotations

import inspect

import ivm
from ivm.views.embedded import EmbeddedEngine
from ivm.views.engine import Engine
from ivm.views.session import Session
from ivm.views.spark.engine import SparkEngine

ATTRIBUTES = ("mode", "saves_indexes", "spark", "partitions", "failure")


def protocol_methods() -> dict[str, inspect.Signature]:
    """Every method of ``Engine`` and its signature."""
    return {
        name: inspect.signature(member)
        for name, member in vars(Engine).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_each_engine_implements_the_whole_protocol() -> None:
    methods = protocol_methods()
    assert {"commit_epoch", "build_view_state", "read", "opening"} <= set(methods)
    for engine in (EmbeddedEngine, SparkEngine):
        for name, expected in methods.items():
            member = getattr(engine, name, None)
            assert inspect.isfunction(member), f"{engine.__name__} lacks {name}"
            got = list(inspect.signature(member).parameters)
            assert got == list(expected.parameters), f"{engine.__name__}.{name}: {got}"
        assert EmbeddedEngine.mode == "embedded" and SparkEngine.mode == "spark"


def test_an_embedded_session_is_a_session_with_the_embedded_engine() -> None:
    db = ivm.connect()
    try:
        assert type(db) is Session and isinstance(db._engine, EmbeddedEngine)
        for name in ATTRIBUTES:
            assert hasattr(db._engine, name), name
        assert db.spark is None and db.partitions is None
        db.execute("CREATE TABLE t (a INT)")
        try:
            db.dataframe("t")
        except ivm.IvmError as error:
            assert "Spark mode" in str(error)
        else:
            raise AssertionError("dataframe() in embedded mode must raise IvmError")
    finally:
        db.close()


def test_no_subclass_overrides_the_session() -> None:
    assert Session.__subclasses__() == []
    assert not any(issubclass(Session, engine) for engine in (EmbeddedEngine, SparkEngine))
