"""Protocols, found by name. Importing this package does not import torch."""

from vlmgrid.protocols.base import Protocol, Runner
from vlmgrid.protocols.choice import MULTIPLE_CHOICE, YES_NO
from vlmgrid.protocols.classification import CLASSIFICATION
from vlmgrid.registry import Registry

PROTOCOLS: Registry[Protocol] = Registry("protocol")
for _protocol in (CLASSIFICATION, MULTIPLE_CHOICE, YES_NO):
    PROTOCOLS.register(_protocol.name, _protocol)


def _capability(protocol_name: str, capabilities) -> str | None:
    protocol = PROTOCOLS.get(protocol_name)
    return next((cap for cap in protocol.strategies if cap in capabilities), None)


def runnable(protocol_name: str, model_settings: dict) -> bool:
    """Whether a model with these settings has a capability that the protocol can use."""
    from vlmgrid.models import BACKENDS

    backend = BACKENDS.get(model_settings["backend"])
    return _capability(protocol_name, backend.capabilities_for(model_settings)) is not None


def make_runner(protocol_name: str, model, bench) -> Runner:
    capability = _capability(protocol_name, model.model_capabilities)
    if capability is None:
        raise ValueError(f"{model.name} has no capability that the {protocol_name} protocol can use")
    return PROTOCOLS.get(protocol_name).strategies[capability](model, bench)


__all__ = ["PROTOCOLS", "Protocol", "Runner", "make_runner", "runnable"]
