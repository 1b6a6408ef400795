"""User-facing errors: a bad setting or input, reported in one line without a traceback.

``train.py`` catches :class:`FFNZooError` and prints ``error: <message>``; any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Iterable


class FFNZooError(Exception):
    """Base class of every error that is the user's input, not a bug."""


class ConfigError(FFNZooError, ValueError):
    """A setting is invalid; the message names it and says what would be valid."""


class UnknownNameError(ConfigError, KeyError):
    """A name (variant, activation, preset) that is not in its table."""

    def __init__(self, kind: str, name: object, valid: Iterable[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class DataError(FFNZooError):
    """A data file or corpus is missing, empty or malformed; the message names the file."""


class CheckpointError(FFNZooError):
    """``ckpt_path`` is missing, unreadable, or from another model; the message names the file."""


def require_positive(**values: float | int | None) -> None:
    """Raise ConfigError naming the first setting that is not > 0 (None is allowed: 'unset')."""
    for name, value in values.items():
        if value is not None and not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
