"""The registries agree with each other: every name one of them uses exists in the other."""


def test_every_benchmark_kind_names_a_registered_protocol_and_metric():
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.metrics import METRICS
    from vlmgrid.protocols import PROTOCOLS

    for name, kind in BENCHMARKS.items():
        assert kind.protocol in PROTOCOLS, name
        assert kind.metric in METRICS, name


def test_which_backend_can_run_which_protocol():
    from vlmgrid.models import BACKENDS
    from vlmgrid.stages.plan import runnable

    expected = {
        "baseline": {"classification", "multiple_choice", "yes_no"},
        "open_clip": {"classification", "multiple_choice", "yes_no"},
        "hf": {"classification", "multiple_choice", "yes_no", "short_answer"},
        "openai": {"classification", "multiple_choice", "yes_no", "short_answer"},  # LVLM prompts: generate
    }
    for backend, protocols in expected.items():
        runs = {
            p
            for p in ("classification", "multiple_choice", "yes_no", "short_answer")
            if runnable(p, {"backend": backend})
        }
        assert runs == protocols, backend
    assert BACKENDS.get("baseline").uses_gpu is False


def test_answer_mode_puts_generation_first():
    from vlmgrid.protocols import strategy_for

    both = {"generate", "score_options"}
    assert strategy_for("multiple_choice", both) == "score_options"
    assert strategy_for("multiple_choice", both, "generate") == "generate"
    assert strategy_for("yes_no", {"generate"}, "likelihood") == "generate"
    assert strategy_for("short_answer", {"score_options"}) is None


def test_unknown_protocol_names_the_closest():
    import pytest

    from vlmgrid.errors import VlmgridError
    from vlmgrid.protocols import PROTOCOLS

    with pytest.raises(VlmgridError, match='did you mean "yes_no"'):
        PROTOCOLS.get("yes-no")


def test_every_paper_is_a_benchmark_kind_with_a_writer_and_captions():
    from importlib import import_module
    from pathlib import Path

    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.report.papers import PAPER_LIST

    captions = Path(__file__).resolve().parents[1] / "workflow" / "report"
    names = [paper.name for paper in PAPER_LIST]
    assert len(names) == len(set(names))  # one Paper per kind, or the report would write its files twice
    for paper in PAPER_LIST:
        assert paper.name in BENCHMARKS, paper.name
        module, function = paper.writer.split(":")
        assert callable(getattr(import_module(module), function)), paper.writer
        for file in paper.files:
            assert file.folder in ("tables", "figures"), paper.name
            assert (captions / f"{file.caption}.rst").is_file(), file.caption


def test_the_config_schema_names_exactly_the_registered_kinds_sources_backends_and_presets():
    """The schema enumerates these names so that loading a config imports no domain package."""
    from vlmgrid.benchmarks import BENCHMARKS, SOURCE_TYPES
    from vlmgrid.config import load_schema
    from vlmgrid.models import BACKENDS
    from vlmgrid.models.base import GENERATION_PRESETS

    defs = load_schema()["$defs"]
    assert sorted(defs["benchmark"]["properties"]["kind"]["enum"]) == BENCHMARKS.names()
    assert sorted(defs["source"]["properties"]["type"]["enum"]) == sorted(SOURCE_TYPES)
    assert sorted(defs["model"]["properties"]["backend"]["enum"]) == BACKENDS.names()
    assert sorted(defs["generation"]["properties"]["preset"]["enum"]) == GENERATION_PRESETS.names()
