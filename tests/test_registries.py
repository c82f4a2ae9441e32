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
    from vlmgrid.protocols import runnable

    expected = {
        "baseline": {"classification", "multiple_choice", "yes_no"},
        "open_clip": {"classification", "multiple_choice", "yes_no"},
        "hf": {"classification", "multiple_choice", "yes_no", "short_answer"},
        "openai": {"classification", "multiple_choice", "yes_no", "short_answer"},  # LVLM prompts: generate
    }
    for backend, protocols in expected.items():
        runs = {p for p in ("classification", "multiple_choice", "yes_no", "short_answer")
                if runnable(p, {"backend": backend})}
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
