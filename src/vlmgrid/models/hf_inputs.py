"""What a transformers model receives for a request: the text handed to its tokenizer and the image its
processor sees. The `hf` backend encodes every batch through this, and `vlmgrid inputs` shows it (with the
processor alone, no weights loaded), so what is shown is what runs.

The text: a request whose prompt is already the whole string (`formatted`, a recipe's `raw` prompt) is that
string; any other is rendered with the checkpoint's own chat template and `add_generation_prompt=True`, from a
system message (the request's own system text, else the model's `system` setting) and a user message whose
content is the request's text and image in the request's order (vlmgrid.model_requests.content_parts). Every
content is a list of typed items, as the hub's chat templates expect (llava-hf's drops a system message given
as a bare string). A checkpoint without any chat template (the BLIP family on the hub) gets the system text
and the prompt as plain text, its processor placing the image itself.

The image: `pad_to_square` pads it to a square with the image processor's mean colour (LLaVA-1.5's
expand2square) and `image_size` resizes it to image_size x image_size; then the processor does the rest.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from vlmgrid.images import pad_to_square
from vlmgrid.model_requests import content_parts

log = logging.getLogger(__name__)


class HfInputs:
    """The text and the image a checkpoint's processor is given for a request, by the model's settings."""

    def __init__(self, processor, settings: dict, model_id: str) -> None:
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.settings = settings
        self.model_id = model_id
        self._warned_template = False

    @property
    def image_processor(self):
        return getattr(self.processor, "image_processor", None)

    def chat_template(self) -> str | None:
        for owner in (self.processor, self.tokenizer):
            template = getattr(owner, "chat_template", None)
            if template:
                return template
        return None

    def text(self, request) -> str:
        """The exact string handed to the tokenizer for this request (before the processor expands the image
        placeholder into the image's tokens)."""
        if request.formatted:
            return request.prompt
        system = request.system if request.system is not None else self.settings.get("system")
        owner = next(
            (owner for owner in (self.processor, self.tokenizer) if getattr(owner, "chat_template", None)),
            None,
        )
        if owner is None:
            if not self._warned_template:
                log.warning("%s has no chat template; prompts are passed as plain text", self.model_id)
                self._warned_template = True
            return f"{system}\n{request.prompt}" if system else request.prompt
        content = [
            {"type": "image"} if kind == "image" else {"type": "text", "text": value}
            for kind, value in content_parts(request)
        ]
        messages = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
        messages.append({"role": "user", "content": content})
        return owner.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def messages(self, request) -> list | None:
        return None  # a checkpoint is handed a text (`text`), not chat messages

    def image(self, image):
        """The image as the processor is handed it: RGB, padded to a square or resized as the settings say."""
        if isinstance(
            image, Future
        ):  # still being opened (`accepts_image_futures`): waited for where it is used
            image = image.result()
        image = image.convert("RGB")
        if self.settings.get("pad_to_square"):
            mean = getattr(self.image_processor, "image_mean", None)
            if mean is None:
                from vlmgrid.errors import VlmgridError

                raise VlmgridError(
                    f"{self.model_id}: pad_to_square pads with the image processor's mean colour, but "
                    f"its processor has no image_mean; remove pad_to_square for this model"
                )
            image = pad_to_square(image, tuple(int(value * 255) for value in mean))
        size = self.settings.get("image_size")
        return image.resize((int(size), int(size))) if size else image

    def pixels(self, image):
        """The float32 pixel values the processor makes of this one image (its `pixel_values`, as it returns
        them for a one-image call), after `image`'s padding or resizing."""
        import numpy as np

        values = self.image_processor(images=[self.image(image)], return_tensors="np")["pixel_values"]
        return np.asarray(values, dtype=np.float32)
