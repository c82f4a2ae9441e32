"""Load a grid config, validate it against the JSON schema, fill its defaults, and check the names it uses.

Every problem becomes one VlmgridError sentence naming the file, the key and the closest valid name. The
schema enumerates the benchmark kinds, source types and backends (tests hold those lists equal to the
registries), so this module imports no domain package: which cells a model cannot run is the plan stage's
rule (`vlmgrid.stages.plan`). Importing it must stay cheap: the Snakefile imports it on every run.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import unreadable
from vlmgrid.fileio import sha256_json
from vlmgrid.registry import closest

DEFAULT_CONFIG = Path("config/config.yaml")

# What a job asks Slurm for when the config's `cluster` section does not say (runtime in minutes).
_CPU_JOB = {"cpus_per_task": 1, "mem_mb": 8000, "runtime": 120}
_TOP_LEVEL_DEFAULTS: dict[str, Any] = {
    "data_dir": "data",
    "results_dir": "results",
    "title": "vlmgrid results",
    "bootstrap": {"samples": 1000, "seed": 0},
    "infer": {"part_size": 1024, "threads": 2, "invariance_items": 32},
    "report": {"flag_error_rate": 10, "partial_cells": "exclude", "reported": "config/reported"},
    "prompts_dir": "config/prompts",
    "cluster": {
        "prepare": _CPU_JOB,
        "fetch_model": _CPU_JOB,
        "infer": {"cpus_per_gpu": 8, "mem_mb": 64000, "runtime": 720, "runtime_from_plan": False},
        "merge_shards": _CPU_JOB,
        "score": _CPU_JOB,
        "compare": _CPU_JOB,
        "inspect": _CPU_JOB,
        "report": _CPU_JOB,
    },
}


#: libyaml's safe loader where PyYAML has it: the same documents for a seventh of the CPU time, and every job
#: loads the schema and its config
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(text: str) -> Any:
    """A YAML text parsed by the fast loader; one it refuses is parsed again by the Python loader, whose error
    (what it found, where, in which construct) is the one explained (yaml_error)."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return yaml.safe_load(text)


#: more values than any grid config holds written out (thousands of models and benchmarks stay far below)
_MAX_VALUES = 1_000_000


def _within(data: Any, limit: int) -> bool:
    """Whether `data`, its YAML aliases expanded, holds at most `limit` values: a few aliases of aliases (the
    "billion laughs") make a short file stand for billions of values, which every later walk of the config
    (the checks, the fingerprints) would visit; one that refers to itself never ends."""
    count, stack = 0, [data]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


def load_schema() -> dict:
    text = resources.files("vlmgrid").joinpath("schemas/config.schema.yaml").read_text(encoding="utf-8")
    return _parse_yaml(text)


@dataclass(frozen=True)
class Cell:
    model: str
    benchmark: str

    @property
    def name(self) -> str:
        return f"{self.model}-{self.benchmark}"


@dataclass
class Config:
    """A validated grid config with defaults filled in."""

    path: Path
    data: dict = field(repr=False)

    @property
    def data_dir(self) -> Path:
        return Path(self.data["data_dir"])

    @property
    def results_dir(self) -> Path:
        return Path(self.data["results_dir"])

    @property
    def title(self) -> str:
        return self.data["title"]

    @property
    def bootstrap(self) -> dict:
        return self.data["bootstrap"]

    @property
    def infer(self) -> dict:
        return self.data["infer"]

    @property
    def report(self) -> dict:
        return self.data["report"]

    @property
    def cluster(self) -> dict:
        return self.data["cluster"]

    @property
    def prompts_dir(self) -> Path:
        return Path(self.data["prompts_dir"])

    @property
    def models(self) -> list[str]:
        return list(self.data["grid"]["models"])

    @property
    def benchmarks(self) -> list[str]:
        return list(self.data["grid"]["benchmarks"])

    @property
    def cells(self) -> list[Cell]:
        return [Cell(m, b) for m in self.models for b in self.benchmarks]

    def model(self, name: str) -> dict:
        return self._entry("models", name)

    def benchmark(self, name: str) -> dict:
        return self._entry("benchmarks", name)

    def shards(self, benchmark: str) -> int:
        """How many jobs Snakemake splits each of the benchmark's cells into (1: the cell is one job)."""
        return int(self.benchmark(benchmark).get("shards", 1))

    @property
    def sharded_benchmarks(self) -> list[str]:
        """The defined benchmarks whose cells run as several shard jobs, in config order."""
        return [name for name in self.data["benchmarks"] if self.shards(name) > 1]

    def cell_settings(self, model: str, benchmark: str) -> dict:
        """The settings a model runs one benchmark with: its settings with those of the benchmark's kind
        (`kinds`) laid over them (vlmgrid.recipes: a recipe fixes a prompt, a decoding or an image
        preprocessing per kind)."""
        return settings_for_kind(self.model(model), self.benchmark(benchmark)["kind"])

    def model_fingerprint(self, name: str) -> str:
        """Changes exactly when the model's settings change: predictions made with other settings are
        stale."""
        return sha256_json(self.model(name))

    def _entry(self, section: str, name: str) -> dict:
        entries = self.data[section]
        if name not in entries:
            raise VlmgridError(
                f'{self.path}: no {section[:-1]} named "{name}"{closest(name, entries)}; '
                f"defined: {', '.join(sorted(entries))}"
            )
        return entries[name]


def load_config(path: str | Path = DEFAULT_CONFIG) -> Config:
    path = Path(path)
    try:
        if not path.is_file():  # which raises where a folder above cannot be entered or the name is too long
            raise VlmgridError(
                f"config file {path} not found; pass --config with the path of a grid config "
                f"(config/config.yaml is the default grid)"
            )
        data = _parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise VlmgridError(yaml_error(path, exc)) from None
    except RecursionError:
        raise VlmgridError(f"{path} nests its YAML deeper than a grid config does; check the file") from None
    except UnicodeDecodeError:
        raise VlmgridError(f"{path} is not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise VlmgridError(f"config file {unreadable(path, exc)}") from None
    if not _within(data, _MAX_VALUES):
        raise VlmgridError(
            f"{path} expands to over {_MAX_VALUES:,} values through its YAML aliases (*name), or refers to "
            "itself: write the repeated settings out, or alias fewer levels deep"
        )
    return validate_config(data, source=path)


#: the fix for a YAML parser's problem (matched on "context: problem"); {start} is where the construct the
#: parser was in began (the bracket, the quote, the key), which is where the fault usually lies
_YAML_FIXES: tuple[tuple[str, str], ...] = (
    (r"found character '\\t'", "indent with spaces, not tabs"),
    (r"expected ',' or '\]'", "close the [ opened at {start} with ], or separate its items with commas"),
    (r"expected ',' or '\}'", "close the {{ opened at {start} with }}, or separate its entries with commas"),
    (r"quoted scalar", "close the quote opened at {start}"),
    (
        r"mapping values are not allowed",
        "quote the value, which holds a ': ', or put the key on a line of its own",
    ),
    (r"could not find expected ':'", "end the key at {start} with ': ', or quote the text"),
    (
        r"expected <block end>",
        "indent the line as deep as the other keys of the block that starts at {start}",
    ),
    (r"constructor for the tag", "remove the tag (the !name before the value): a grid config is plain YAML"),
    (r"alias", "define the anchor (&name) before its alias (*name), or quote the text"),
)


def _yaml_mark(mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def yaml_error(path: str | Path, exc: yaml.YAMLError) -> str:
    """One sentence for a file that is not valid YAML: the file, the line and column, what the parser found
    and the fix."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    start_mark = getattr(exc, "context_mark", None) or mark
    where = f" at {_yaml_mark(mark)}" if mark else ""
    start = _yaml_mark(start_mark) if start_mark else "the line named"
    said = f"{getattr(exc, 'context', None) or ''}: {problem}"
    fix = next((fix for pattern, fix in _YAML_FIXES if re.search(pattern, said)), "correct the YAML there")
    return f"{path} is not valid YAML{where} ({problem}); {fix.format(start=start)}"


def validate_config(data: Any, source: str | Path = "<config>") -> Config:
    """Schema check, then name checks; returns the config with defaults filled.

    A model that cannot run a benchmark of the grid is no error: the cell is not applicable
    (`vlmgrid.stages.plan.not_applicable`), and its files say so.
    """
    import jsonschema

    if not isinstance(data, dict):
        raise VlmgridError(f"{source}: the config must be a mapping of keys (benchmarks, models, grid, ...)")
    schema = load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise VlmgridError(f"{source}: {_describe(error)}")
    filled = _with_recipes(_with_defaults(data), validator, source)
    _check_names(filled, source)
    _check_served_models(filled, source)
    return Config(path=Path(source), data=filled)


def _with_defaults(data: dict) -> dict:
    return _merged(_TOP_LEVEL_DEFAULTS, copy.deepcopy(data))


def _with_recipes(data: dict, validator, source) -> dict:
    """Every model entry that names a recipe, with the recipe's settings filled in (vlmgrid.recipes), checked
    against the schema as the entry would be."""
    import jsonschema

    from vlmgrid.recipes import with_recipe

    for name, entry in data["models"].items():
        if "recipe" not in entry:
            continue
        merged = with_recipe(entry, f"{source}: models.{name}")
        shown = {key: value for key, value in merged.items() if key != "departs_from_recipe"}
        error = jsonschema.exceptions.best_match(validator.iter_errors({**data, "models": {name: shown}}))
        if error is not None:
            raise VlmgridError(f"{source}: recipe {entry['recipe']} applied: {_describe(error)}")
        data["models"][name] = merged
    return data


def settings_for_kind(settings: dict, kind: str) -> dict:
    """A model's settings for the cells of one benchmark kind: its `kinds` entry for that kind laid over the
    others (a mapping such as `generation` merged key by key), and `kinds` itself gone."""
    own = (settings.get("kinds") or {}).get(kind) or {}
    resolved = {key: value for key, value in settings.items() if key != "kinds"}
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(resolved.get(key), dict):
            resolved[key] = {**resolved[key], **value}
        else:
            resolved[key] = copy.deepcopy(value)
    return resolved


def _merged(default: dict, given: dict) -> dict:
    """`given` with every key it lacks taken from `default`, at every depth (cluster.infer.mem_mb alone keeps
    the other infer defaults)."""
    filled = dict(given)
    for key, value in default.items():
        if key not in filled:
            filled[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(filled[key], dict):
            filled[key] = _merged(value, filled[key])
    return filled


def _location(error) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "the top level"


def _describe(error) -> str:
    """One sentence for a jsonschema error, with the closest valid name where one exists."""
    where = _location(error)
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - allowed)
        key = unexpected[0] if unexpected else "?"
        hint = closest(key, allowed)
        valid = ", ".join(sorted(allowed))
        return f'unknown key "{key}" in {where}{hint}; valid keys: {valid}'
    if error.validator == "enum":
        hint = closest(str(error.instance), [str(v) for v in error.validator_value])
        valid = ", ".join(str(v) for v in error.validator_value)
        return f'{where}: "{error.instance}" is not a valid value{hint}; valid values: {valid}'
    if error.validator == "type":
        return f"{where}: expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if (
        error.validator in ("pattern", "not")
        and error.absolute_schema_path
        and "propertyNames" in error.absolute_schema_path
    ):
        return (
            f'{where}: "{error.instance}" is not a valid name (lowercase letters, digits, ".", "_", "-"; '
            'not "models")'
        )
    # A property may carry the fix for its own bad values (`x-fix` in the schema).
    fix = error.schema.get("x-fix") if isinstance(error.schema, dict) else None
    return f"{where}: {error.message}" + (f"; {fix}" if fix else "")


def _check_names(data: dict, source) -> None:
    # Benchmark kinds and backends are enums of the schema (a test holds them equal to the registries).
    for section in ("models", "benchmarks"):
        for name in data["grid"][section]:
            if name not in data[section]:
                raise VlmgridError(
                    f'{source}: grid.{section} names "{name}", which is not defined under {section}'
                    f"{closest(name, data[section])}; defined: {', '.join(sorted(data[section]))}"
                )
    reference = data["report"].get("reference_model")
    if reference is not None and reference not in data["grid"]["models"]:
        models = data["grid"]["models"]
        raise VlmgridError(
            f'{source}: report.reference_model names "{reference}", which is not a model of the grid'
            f"{closest(reference, models)}; grid.models: {', '.join(models)}"
        )


def _check_served_models(data: dict, source) -> None:
    """An `openai` model talks to a server at `base_url`, or to one its jobs start (`serve`): exactly one of
    them; the keys that only mean something for a started server (weights, GPUs) need `serve`."""
    for name, model in data["models"].items():
        if model["backend"] != "openai":
            continue
        where = f"{source}: models.{name}"
        if "serve" in model and "base_url" in model:
            raise VlmgridError(
                f"{where} has both base_url and serve: a served model's address is the server its "
                f"job starts; remove base_url"
            )
        if "serve" not in model and "base_url" not in model:
            raise VlmgridError(
                f"{where} needs base_url (a running server's address), or serve (a server its jobs start)"
            )
        for key in ("gpus", "source"):
            if key in model and "serve" not in model:
                raise VlmgridError(
                    f"{where}.{key} means something only for a server the jobs start (serve); "
                    f"remove {key}, or add serve"
                )


def workflow_config_file(configfiles: Sequence[str | Path] = (), argv: Sequence[str] = ()) -> Path:
    """The one grid config a Snakemake run reads: the file given with --configfile, else config/config.yaml.

    Every job's `vlmgrid` command reads that file alone, so Snakemake must plan exactly its grid: the
    Snakefile names no config file of its own (Snakemake would merge the given file into it), and more than
    one file is refused (Snakemake would merge them, or keep only the last). `configfiles` are the files
    Snakemake read from the command line; `argv` the command line itself, where a repeated --configfile shows
    (only the last reaches `configfiles`).
    """
    given = [str(path) for path in configfiles]
    named = _configfile_args(argv)
    if len(named) > len(given):
        given = named
    if len(given) > 1:
        raise VlmgridError(
            f"--configfile was given {len(given)} files ({', '.join(given)}), but a run reads one grid "
            f"config: put the grid in one file and pass only that one"
        )
    return Path(given[0]) if given else DEFAULT_CONFIG


def _configfile_args(argv: Sequence[str]) -> list[str]:
    """The files a command line gives to --configfile/--configfiles (each may be followed by several)."""
    argv = list(argv)
    if not argv or not Path(argv[0]).as_posix().endswith(("snakemake", "snakemake/__main__.py")):
        return []  # not a snakemake command line (the workflow runs through the Python API)
    files: list[str] = []
    taking = False
    for arg in argv[1:]:
        if arg.startswith("-"):
            name, _, value = arg.partition("=")
            taking = name in ("--configfile", "--configfiles") and not value
            if value and name in ("--configfile", "--configfiles"):
                files.append(value)
        elif taking:
            files.append(arg)
    return files
