"""Exceptions of judgecal-dist.

Messages read ``<table or file>: <column>: <what is wrong> (<count>, e.g. <keys>)`` so that a user can find the
offending rows without a traceback. The CLI maps :class:`InputError` and :class:`ConfigError` to exit code 2 and
every other :class:`JudgecalError` to exit code 1.
"""

from __future__ import annotations

__all__ = ["JudgecalError", "InputError", "ConfigError", "RunError", "first_line"]


class JudgecalError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(JudgecalError, ValueError):
    """Input data violates a data contract (schema, keys, categories, ranges, emptiness, unreadable file)."""


class ConfigError(JudgecalError, ValueError):
    """A study or engine configuration is invalid (unknown key, bad value, missing setting)."""


class RunError(JudgecalError, RuntimeError):
    """A run failed after its input was accepted (a replicate raised, results could not be committed)."""


def first_line(err: BaseException) -> str:
    """The first line of an error's message (its class name when empty): what a one-line error shows of a cause."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
