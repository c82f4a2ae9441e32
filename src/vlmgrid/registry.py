"""A small name -> object registry whose lookup errors name the closest valid name."""

from __future__ import annotations

import difflib
from typing import Generic, Iterator, TypeVar

from vlmgrid.errors import VlmgridError

T = TypeVar("T")


def closest(name: str, choices) -> str:
    """' (did you mean "x"?)' for the closest of `choices`, or '' when nothing is close."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f' (did you mean "{match[0]}"?)' if match else ""


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items))
            raise VlmgridError(
                f'unknown {self.kind} "{name}"{closest(name, self._items)}; valid names: {valid}'
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def items(self):
        return sorted(self._items.items())
