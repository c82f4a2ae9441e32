"""Recipes: what a model family's published evaluation fixed, as data (a YAML file per recipe beside this
module), applied to a model entry that names it (`recipe: llava-1.5`). On the shared floor: the config applies
them.

A recipe is a set of model settings and, per benchmark kind, the settings of that kind's cells (`kinds`): the
system text, the image preprocessing, precision, decoding, the answering method and the prompt as the authors'
question files write it (vlmgrid.prompt_templates). Applying it fills the model entry with them, so they are
part of the model's settings like any other: recorded in every predictions file, hashed into every job's
fingerprint. A model entry may not set what its recipe fixes (`OWNED`): that would be another evaluation than
the one the recipe cites. Two things stay the entry's: its batch size (a means, checked by the batch check),
and `answer_mode: likelihood`, which scores the options instead of reading a generated answer; that departure
is recorded in the settings (`departs_from_recipe`), so the plan, the predictions and the report say the cell
answered by another method than its recipe's.

A recipe file: `title`, `paper`, `backends` (the backends it applies to), `follows` (the files and commits it
follows: repo, commit, path, and what it takes from them), `settings` (model settings, `kinds` among them) and
`remains` (what differs from the authors' evaluation all the same, in words). A kind's prompt may name a table
of `data/` (`data: kaleidoscope`) that several recipes share: the authors' texts, copied once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from vlmgrid.errors import VlmgridError
from vlmgrid.registry import closest

#: Model settings a recipe owns: what the model receives and how it decodes. An entry with a recipe sets none.
OWNED = frozenset(
    {
        "system",
        "pad_to_square",
        "image_size",
        "image_alpha",
        "image_detail",
        "processor_kwargs",
        "precision",
        "generation",
        "kinds",
        "prompt_mode",
        "answer_mode",
    }
)
#: The one departure an entry may take, with the words the departure is recorded in.
DEPARTURES = {
    ("answer_mode", "likelihood"): "answer_mode: likelihood (scores the options; the recipe reads a "
    "generated answer)"
}
_FILE_KEYS = frozenset({"title", "paper", "backends", "follows", "settings", "remains"})


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    paper: str
    backends: tuple[str, ...]
    follows: tuple[Mapping[str, str], ...]
    settings: Mapping[str, Any]
    remains: tuple[str, ...] = field(default=())

    @property
    def kinds(self) -> Mapping[str, Mapping[str, Any]]:
        return self.settings.get("kinds") or {}


def _folder():
    return resources.files("vlmgrid").joinpath("recipes")


def recipe_names() -> list[str]:
    """Every recipe shipped with the package, by name."""
    return sorted(
        entry.name[: -len(".yaml")] for entry in _folder().iterdir() if entry.name.endswith(".yaml")
    )


@cache
def load_recipe(name: str) -> Recipe:
    """The recipe `name`; an unknown name or a malformed file is one sentence."""
    names = recipe_names()
    if name not in names:
        raise VlmgridError(
            f'there is no recipe "{name}"{closest(name, names)}; the recipes are {", ".join(names)}'
        )
    where = f"recipe {name} (src/vlmgrid/recipes/{name}.yaml)"
    try:
        data = yaml.safe_load(_folder().joinpath(f"{name}.yaml").read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise VlmgridError(f"{where} is not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise VlmgridError(f"{where}: must hold a mapping")
    unknown = sorted(set(data) - _FILE_KEYS)
    missing = sorted({"title", "paper", "backends", "follows", "settings"} - set(data))
    if unknown or missing:
        raise VlmgridError(
            f"{where}: "
            + (f"unknown key {unknown[0]!r}" if unknown else f"lacks {missing[0]!r}")
            + f"; a recipe holds {', '.join(sorted(_FILE_KEYS))}"
        )
    settings, allowed = data["settings"], OWNED | {"batch_size"}
    if not isinstance(settings, dict) or set(settings) - allowed:
        extra = sorted(set(settings) - allowed) if isinstance(settings, dict) else ["?"]
        raise VlmgridError(f"{where}: `settings` may hold {', '.join(sorted(allowed))}, not {extra[0]!r}")
    follows = data["follows"]
    if (
        not isinstance(follows, list)
        or not follows
        or not all(
            isinstance(entry, dict) and {"repo", "commit", "path", "for"} <= set(entry) for entry in follows
        )
    ):
        raise VlmgridError(
            f"{where}: `follows` must list the files it follows, each with repo, commit, path and for"
        )
    for kind, spec in (settings.get("kinds") or {}).items():
        prompt = (spec or {}).get("prompt") or {}
        if isinstance(prompt.get("data"), str):  # a table of recipes/data/, written into the settings
            prompt["data"] = _table(prompt["data"], f"{where}: kinds.{kind}.prompt.data")
    return Recipe(
        name=name,
        title=str(data["title"]),
        paper=str(data["paper"]),
        backends=tuple(data["backends"]),
        follows=tuple(follows),
        settings=settings,
        remains=tuple(data.get("remains") or ()),
    )


def _table(name: str, where: str) -> dict:
    """A recipe's shared table (recipes/data/<name>.yaml): the authors' texts that several recipes' templates
    read. Its content, not its name, goes into the model's settings, so an edit to it reruns what read it."""
    entry = _folder().joinpath("data", f"{name}.yaml")
    if not entry.is_file():
        raise VlmgridError(f"{where}: names the table {name!r}, which is not in src/vlmgrid/recipes/data/")
    table = yaml.safe_load(entry.read_text(encoding="utf-8"))
    if not isinstance(table, dict):
        raise VlmgridError(f"{where}: the table {name!r} must hold a mapping")
    return table


def with_recipe(entry: dict, where: str) -> dict:
    """The model entry with its recipe's settings filled in (an entry without `recipe` as it is).

    A setting the recipe owns is refused in one sentence naming it, except the one departure DEPARTURES
    allows, which overrides the recipe's answering in every kind and is recorded as `departs_from_recipe`.
    """
    name = entry.get("recipe")
    if name is None:
        return entry
    recipe = load_recipe(name)
    if entry["backend"] not in recipe.backends:
        raise VlmgridError(
            f"{where}: recipe {name} is for the {' and '.join(recipe.backends)} backend"
            f"{'s' if len(recipe.backends) > 1 else ''}, not {entry['backend']}; remove `recipe` or "
            f"change the backend"
        )
    departures = []
    for key in sorted(set(entry) & OWNED):
        departure = DEPARTURES.get((key, entry[key])) if isinstance(entry[key], str) else None
        if departure is None:
            raise VlmgridError(
                f"{where}.{key}: recipe {name} fixes {key} (as {recipe.title.lower()} did); remove "
                f"it from the entry, or remove `recipe` to set everything yourself"
            )
        departures.append(departure)
    merged = {**copy.deepcopy(dict(recipe.settings)), **entry}
    if departures:
        merged["departs_from_recipe"] = departures
        # the departure holds for every kind: a kind's own answer_mode is the recipe's, not the entry's
        merged["kinds"] = {
            kind: {k: v for k, v in spec.items() if k != "answer_mode"}
            for kind, spec in (merged.get("kinds") or {}).items()
        }
    return merged
