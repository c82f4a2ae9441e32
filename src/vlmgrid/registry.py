"""Name -> object registries, each built once from one explicit list, whose lookup errors name the closest
name.

One style for every registry of the package (benchmark kinds, sources, backends, protocols, parsers, metrics,
fixtures): the package's `__init__.py` lists its members in one place and builds the registry from them, and
each member carries its own `name`:

    BACKENDS = Registry("model backend", [Baseline, OpenClip, OpenAI, Hf])

Nothing registers itself on import, and a registry never changes after it is built, so what a registry holds
is read in one line of code, and no import order can change it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from vlmgrid.errors import VlmgridError

T = TypeVar("T")


def closest(name: str, choices) -> str:
    """' (did you mean "x"?)' for the closest of `choices`, or '' when nothing is close."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f' (did you mean "{match[0]}"?)' if match else ""


class Registry(Generic[T]):
    """The members of one kind of thing, by their `name` attribute; read-only once built."""

    def __init__(self, kind: str, members: Iterable[T]) -> None:
        self.kind = kind
        items: dict[str, T] = {}
        for member in members:
            name = getattr(member, "name", None)
            if not isinstance(name, str) or not name:
                raise ValueError(f"{kind} {member!r} has no `name`")
            if name in items:
                raise ValueError(f"{kind} {name!r} is listed twice")
            items[name] = member
        self._items = items

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

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self):
        return sorted(self._items.items())
