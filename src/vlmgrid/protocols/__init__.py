"""Protocols (PROTOCOLS): how a model answers each kind of question, and the parsers of generated answers.
Imported from the floor above (stages); it imports only the shared modules below it.

A protocol turns a benchmark's records into a model's prediction rows; which of a model's capabilities runs
it: `strategy_for`, `make_runner`; `vlmgrid.protocols.parsing` reads generated text as answers. Importing this
package does not import torch.
"""

from vlmgrid.protocols.base import Protocol, Runner
from vlmgrid.protocols.choice import MULTIPLE_CHOICE, YES_NO
from vlmgrid.protocols.classification import CLASSIFICATION
from vlmgrid.protocols.cvqa import CVQA
from vlmgrid.protocols.exam_choice import EXAM_CHOICE
from vlmgrid.protocols.ranking import RANKING
from vlmgrid.protocols.short_answer import SHORT_ANSWER
from vlmgrid.registry import Registry

PROTOCOLS: Registry[Protocol] = Registry(
    "protocol", [CLASSIFICATION, MULTIPLE_CHOICE, YES_NO, SHORT_ANSWER, CVQA, EXAM_CHOICE, RANKING]
)


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


def make_runner(protocol_name: str, model, bench) -> tuple[Runner, str]:
    """The runner for this model on this benchmark, and how it answers (recorded with the predictions)."""
    capability = strategy_for(protocol_name, model.model_capabilities, model.settings.get("answer_mode"))
    if capability is None:
        raise ValueError(f"{model.name} has no capability that the {protocol_name} protocol can use")
    runner = PROTOCOLS.get(protocol_name).strategies[capability](model, bench)
    # A strategy that answers different variants differently says so in its `strategy` attribute.
    return runner, getattr(runner, "strategy", capability)


__all__ = ["PROTOCOLS", "Protocol", "Runner", "make_runner", "strategy_for"]
