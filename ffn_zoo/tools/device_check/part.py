"""One part of the check as its child process sees it: its sizes, its deadline, its typed result saved as it grows.

A part's result is a dataclass (``EnvResult``, ``StepResult``, ...); ``<work>/<part>.json`` holds it (``asdict``)
with the part's error, written atomically whenever it grows, so a part killed at its budget keeps what it had.
``from_json`` reads it back into the dataclass, nested rows included.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import time
import types
import typing
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, Iterator, TypeVar

import torch

from ffn_zoo.atomic import atomic_write_bytes
from ffn_zoo.tools.device_check.sizes import Sizes

R = TypeVar("R")  # this part's result type
T = TypeVar("T")  # another part's


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """The dataclass ``cls`` from its ``asdict`` form: nested dataclasses, lists and dicts of them rebuilt.
    An unknown or missing field raises TypeError (a half-written row reads as incomplete, not as zeros)."""
    hints = typing.get_type_hints(cls)
    unknown = set(data) - set(hints)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)}")
    return cls(**{k: _typed(hints[k], v) for k, v in data.items()})


def _typed(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value)
    if origin is list:
        return [_typed(args[0], v) for v in value]
    if origin is tuple:
        return tuple(value)
    if origin is dict:
        return {k: _typed(args[1], v) for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):  # X | None: the X
        return _typed(next(a for a in args if a is not type(None)), value)
    return value


@dataclass
class Saved:
    """What a part's file holds: its result (as written) and how it ended."""

    result: dict[str, Any]
    error: str | None = None
    traceback: str | None = None


def read_saved(work: Path, name: str) -> Saved | None:
    path = work / f"{name}.json"
    return from_json(Saved, json.loads(path.read_text())) if path.is_file() else None


@dataclass
class Part(Generic[R]):
    """A running part: ``result`` grows as it measures; ``save()`` after each step of it."""

    name: str
    sizes: Sizes
    work: Path  # runs, logs, caches, and every part's <name>.json
    deadline: float  # time.time() at which the parent kills this part
    result: R
    data: Path | None = None  # the Wikipedia shards for part glu (None: the toy corpus)
    error: str | None = None
    traceback: str | None = None

    def left(self) -> float:
        return self.deadline - time.time()

    def save(self) -> None:
        saved = Saved(asdict(self.result), self.error, self.traceback)  # type: ignore[call-overload]
        atomic_write_bytes(self.work / f"{self.name}.json", json.dumps(asdict(saved), indent=1, default=str).encode())

    def prior(self, name: str, cls: type[T]) -> T | None:
        """An earlier part's result (None when it did not run or wrote nothing readable)."""
        saved = read_saved(self.work, name)
        try:
            return from_json(cls, saved.result) if saved else None
        except TypeError:  # killed half-way through writing a row
            return None

    def log(self, msg: str) -> None:
        print(f"[{self.name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)



def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def matmul_precision(tf32: bool) -> Iterator[None]:
    """fp32 matmuls on TF32 tensor cores (``high``, train's impl.matmul_precision=high) or strict fp32."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
