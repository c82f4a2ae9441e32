"""The registries agree with each other: every name one of them uses exists in the other."""


def test_every_benchmark_kind_names_a_registered_protocol_and_metric():
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.metrics import METRICS
    from vlmgrid.protocols import PROTOCOLS

    for name, kind in BENCHMARKS.items():
        assert kind.protocol in PROTOCOLS, name
        assert kind.metric in METRICS, name


def test_every_backend_can_run_every_protocol_it_claims():
    from vlmgrid.models import BACKENDS
    from vlmgrid.protocols import PROTOCOLS, runnable

    for protocol in PROTOCOLS:
        assert runnable(protocol, {"backend": "baseline"})
        assert runnable(protocol, {"backend": "open_clip"})
    assert BACKENDS.get("baseline").uses_gpu is False


def test_unknown_protocol_names_the_closest():
    import pytest

    from vlmgrid.errors import VlmgridError
    from vlmgrid.protocols import PROTOCOLS

    with pytest.raises(VlmgridError, match='did you mean "yes_no"'):
        PROTOCOLS.get("yes-no")
