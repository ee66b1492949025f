"""A lean context manager does what contextlib's does with a block's result and its errors."""

from __future__ import annotations

import contextlib

import pytest

from zaqar_lite.storage.contexts import lean_contextmanager


def translating(log):
    try:
        log.append("enter")
        yield "value"
        log.append("left")
    except KeyError as exc:
        log.append("translated")
        raise LookupError("translated") from exc
    except ValueError:
        log.append("swallowed")
    finally:
        log.append("finally")


def twice(log):
    yield 1
    yield 2


def never(log):
    return
    yield


BLOCKS = {
    "returns": lambda value: value,
    "raises a translated error": lambda value: {}["missing"],
    "raises a swallowed error": lambda value: int("x"),
    "raises an error passed on": lambda value: 1 / 0,
    "raises StopIteration": lambda value: next(iter(())),
    "raises RuntimeError": lambda value: (_ for _ in ()).throw(RuntimeError("own")),
}


def outcome(decorator, generator, block):
    log: list[str] = []
    try:
        with decorator(generator)(log) as value:
            result = block(value)
    except BaseException as exc:  # noqa: BLE001 - the outcome compared is the exception itself
        cause = type(exc.__cause__).__name__ if exc.__cause__ else None
        return log, type(exc).__name__, str(exc), cause
    return log, "returned", repr(result if "result" in locals() else None), None


@pytest.mark.parametrize("generator", [translating, twice, never], ids=lambda g: g.__name__)
@pytest.mark.parametrize("block", list(BLOCKS))
def test_a_lean_context_ends_as_contextlibs_does(generator, block):
    assert (outcome(lean_contextmanager, generator, BLOCKS[block])
            == outcome(contextlib.contextmanager, generator, BLOCKS[block]))


def test_a_lean_context_is_cheaper_than_contextlibs():
    from tests.budget import InstructionCounter

    def counted(decorator):
        make = decorator(translating)
        with InstructionCounter() as counter:
            with make([]):
                pass
        return counter.instructions

    assert counted(lean_contextmanager) + 30 < counted(contextlib.contextmanager)
