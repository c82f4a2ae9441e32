"""The one exception type a user sees: a single sentence naming the file, key or item and the fix."""


class VlmgridError(Exception):
    """A problem with the user's input or environment, reported without a traceback."""
