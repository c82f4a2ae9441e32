"""The one exception type a user sees: a single sentence naming the file, key or item and the fix."""

from __future__ import annotations

from collections.abc import Mapping


class VlmgridError(Exception):
    """A problem with the user's input or environment, reported without a traceback.

    `quoted`: lines from elsewhere that the sentence shows below it (a server's last log lines), after a line
    break of its own; the command prints them as lines, where every other line break in the message is data
    (an item id's) and is shown escaped (vlmgrid.messages.error_text).
    """

    def __init__(self, message: str, quoted: str | None = None) -> None:
        super().__init__(message if quoted is None else f"{message}\n{quoted}")
        self.sentence, self.quoted = message, quoted


class InferenceFailed(VlmgridError):
    """Inference failed, not the item: a server, network or memory fault, or a capability the model entry asks
    for and the server lacks. Unlike a data error (an unreadable image, an item the model cannot take), it is
    never written as a prediction row: the job retries the items or stops, keeping its finished parts.

    `failures` maps the items that failed to why ({} when the fault is not the items', e.g. out of memory);
    `stop` says the fault is systemic (a dead server, missing credentials, a missing capability, memory), so
    the job must end now rather than go on with other items.
    """

    def __init__(
        self, message: str, failures: Mapping[str, str] | None = None, *, stop: bool = False
    ) -> None:
        super().__init__(message)
        self.failures = dict(failures or {})
        self.stop = stop


class CapabilityMissing(InferenceFailed):
    """The server lacks a capability the model entry asks for (`capability`, e.g. "score_options" when it
    returns no logprobs); the job stops, or with `answer_mode: auto` falls back to another way of
    answering."""

    def __init__(self, message: str, capability: str) -> None:
        super().__init__(message, stop=True)
        self.capability = capability
