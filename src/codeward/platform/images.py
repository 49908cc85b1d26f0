"""Images sent to the model, as the data-URL parts that chat APIs accept."""

from __future__ import annotations

import base64
import io
from typing import Any


def image_parts(images: list[Any]) -> list[dict[str, Any]]:
    """PIL images (or PNG/JPEG bytes) as chat content parts."""
    parts = []
    for image in images:
        if isinstance(image, (bytes, bytearray)):
            data = bytes(image)
        elif hasattr(image, "save"):
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            data = buffer.getvalue()
        else:
            raise TypeError(f"images must be PIL images or PNG/JPEG bytes, got {type(image).__name__}")
        kind = "jpeg" if data[:3] == b"\xff\xd8\xff" else "png"
        url = f"data:image/{kind};base64,{base64.b64encode(data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts
