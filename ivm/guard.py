"""The public API's one promise about failure: only an ``ivm.IvmError`` ever leaves it.

``guarded`` wraps a public function or method: an ``IvmError`` passes through, and
any other ``Exception`` (an ``AssertionError`` from a library, a ``KeyError`` from a
bug) becomes an ``InternalError`` that names the call, says it is ivm's bug and
chains the original (``__cause__``). ``KeyboardInterrupt``, ``SystemExit`` and other
``BaseException``s pass untouched, and so does ``MemoryError``: the machine's, not a
bug. A ``TypeError`` raised by the call itself (the caller passed arguments the
function does not take, before any of ivm ran) is the caller's, as for any Python
function, and passes too.

``guard_public`` guards every public method and property of a class (names without a
leading underscore); the session guards itself and each subclass with it, so a
method added later is guarded without anyone remembering to. A method that converts
an exception calls the session's ``_after_unexpected()`` first, which drops what the
session keeps in memory besides the catalog (rebuilt from the stored state at first
use): the failure may have left it half updated. What is stored needs nothing: an
``ingest`` and a DDL script each run in one transaction, rolled back on any exception
(Spark mode's partitions with it), so a failure inside applies nothing (one in the
in-memory bookkeeping after an epoch committed leaves that epoch applied, as it is).
"""

from __future__ import annotations

import contextlib
import functools
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ivm.errors import InternalError, IvmError

F = TypeVar("F", bound=Callable[..., Any])

REPORT = (
    "This is a bug in ivm, not in your data or SQL: please report it, with the SQL of your "
    "tables and views"
)

_GUARDED = "__ivm_guarded__"
_ARGUMENT = reprlib.Repr()
_ARGUMENT.maxstring = 60


def guarded(function: F) -> F:
    """``function`` letting only ``IvmError`` out (see the module docstring)."""
    if getattr(function, _GUARDED, False):
        return function

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (IvmError, MemoryError):
            raise
        except Exception as error:
            if isinstance(error, TypeError) and _raised_by_the_call(error):
                raise
            failure = unexpected(error, _described(function, args))
            _forget_memory(args)
            raise failure from error

    setattr(call, _GUARDED, True)
    return call  # type: ignore[return-value]


def internal_message(cause: str, view: str = "", construct: str = "", what: str = "") -> str:
    """An ``InternalError``'s message: where (view, construct), what failed (by default
    the SQL ivm generated), what DuckDB or Python said, and the request for a report."""
    where = f"view {view!r}: " if view else ""
    what = what or "ivm's own SQL"
    if construct:
        what += f" for its {construct}"
    return f"{where}{what} failed: {cause.rstrip('.')}. {REPORT}."


def unexpected(error: BaseException, what: str) -> InternalError:
    """The ``InternalError`` for an exception ivm did not expect in ``what`` (chain it)."""
    cause = " ".join(f"{type(error).__name__}: {error}".split())
    if len(cause) > 500:
        cause = cause[:497] + "…"
    return InternalError(internal_message(cause, what=what))


def guard_public(cls: type) -> type:
    """Guard every public method and property ``cls`` has, its bases' included (each is
    wrapped once: a base guarded already is left as it is)."""
    for name in dir(cls):
        attribute = _lookup(cls, name)
        if name.startswith("_") or getattr(attribute, _GUARDED, False):
            continue
        if isinstance(attribute, property):
            setattr(cls, name, wrapped_property(attribute, guarded, _GuardedProperty))
        elif callable(attribute) and not isinstance(attribute, (type, staticmethod, classmethod)):
            setattr(cls, name, guarded(attribute))
    return cls


def wrapped_property(
    attribute: property, wrap: Callable[[Any], Any], kind: type[property] | None = None
) -> property:
    """``attribute`` with each accessor passed through ``wrap``, as a property of ``kind``
    (default: its own type), keeping its docstring. A property subclass loses ``doc=``
    (Python 3.11 sets it on the instance, where the subclass's own ``__doc__`` hides it),
    so the docstring is set on the instance after."""
    wrapped = (kind or type(attribute))(
        *(wrap(f) if f is not None else None
          for f in (attribute.fget, attribute.fset, attribute.fdel))
    )
    wrapped.__doc__ = attribute.__doc__
    return wrapped


class _GuardedProperty(property):
    # A property whose accessors are guarded. No docstring: a subclass's own would hide
    # every instance's (``help(Session.epoch)`` read this sentence, not the property's).

    __ivm_guarded__ = True


def _lookup(cls: type, name: str) -> Any:
    """The attribute as the class dictionary holding it has it (no descriptor bound)."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name]
    return None


def _raised_by_the_call(error: TypeError) -> bool:
    """Whether ``error`` was raised binding the call's arguments: its traceback ends in
    ``call`` itself, no frame of the function below it."""
    traceback = error.__traceback__
    return traceback is not None and traceback.tb_next is None


def _described(function: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """The call, for the message: ``execute('CREATE VIEW v AS …')``, ``ingest('orders')``,
    ``ingest({'orders': …, 'customers': …})``."""
    inside = ""
    for argument in args[:2]:  # (self,) the first argument: a name, SQL or batches
        if isinstance(argument, str):
            inside = _ARGUMENT.repr(argument)
            break
        if isinstance(argument, Mapping):
            inside = "{" + ", ".join(f"{_ARGUMENT.repr(k)}: …" for k in list(argument)[:5]) + "}"
            break
    return f"ivm's {function.__name__}({inside})"


def _forget_memory(args: tuple[Any, ...]) -> None:
    """Tell the session (a method's ``self``) that an unexpected failure went through it."""
    forget = getattr(args[0], "_after_unexpected", None) if args else None
    if forget is not None:
        with contextlib.suppress(Exception):  # the original failure is the one to raise
            forget()
