"""Protocols, found by name. Importing this package does not import torch."""

from vlmgrid.protocols.base import Protocol, Runner
from vlmgrid.protocols.choice import MULTIPLE_CHOICE, YES_NO
from vlmgrid.protocols.classification import CLASSIFICATION
from vlmgrid.protocols.exam_choice import EXAM_CHOICE
from vlmgrid.protocols.cvqa import CVQA
from vlmgrid.protocols.short_answer import SHORT_ANSWER
from vlmgrid.protocols.ranking import RANKING
from vlmgrid.registry import Registry

PROTOCOLS: Registry[Protocol] = Registry("protocol")
for _protocol in (CLASSIFICATION, MULTIPLE_CHOICE, YES_NO, SHORT_ANSWER, CVQA):
    PROTOCOLS.register(_protocol.name, _protocol)
PROTOCOLS.register(EXAM_CHOICE.name, EXAM_CHOICE)
PROTOCOLS.register(RANKING.name, RANKING)


# A model's `answer_mode` puts one kind of answering first; otherwise the protocol's own order stands.
_MODE_CAPABILITY = {"generate": "generate", "likelihood": "score_options"}


def strategy_for(protocol_name: str, capabilities, answer_mode: str | None = None) -> str | None:
    """The capability whose strategy runs this protocol for a model, or None when it has none."""
    order = list(PROTOCOLS.get(protocol_name).strategies)
    preferred = _MODE_CAPABILITY.get(answer_mode or "")
    if preferred in order:
        order.remove(preferred)
        order.insert(0, preferred)
    return next((capability for capability in order if capability in capabilities), None)


def runnable(protocol_name: str, model_settings: dict) -> bool:
    """Whether a model with these settings has a capability that the protocol can use."""
    from vlmgrid.models import BACKENDS

    backend = BACKENDS.get(model_settings["backend"])
    return strategy_for(protocol_name, backend.capabilities_for(model_settings)) is not None


def make_runner(protocol_name: str, model, bench) -> tuple[Runner, str]:
    """The runner for this model on this benchmark, and how it answers (recorded with the predictions)."""
    capability = strategy_for(protocol_name, model.model_capabilities, model.settings.get("answer_mode"))
    if capability is None:
        raise ValueError(f"{model.name} has no capability that the {protocol_name} protocol can use")
    runner = PROTOCOLS.get(protocol_name).strategies[capability](model, bench)
    # A strategy that answers different variants differently says so in its `strategy` attribute.
    return runner, getattr(runner, "strategy", capability)


__all__ = ["PROTOCOLS", "Protocol", "Runner", "make_runner", "runnable", "strategy_for"]
