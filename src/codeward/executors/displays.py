"""Rich outputs a sandbox showed (a plot, a table as HTML), kept as the bytes it sent.

A display is data from the sandbox: decoding a PNG on arrival let four small files
of 13000x13000 pixels grow the host by gigabytes. So a `Display` holds its MIME
type and bytes, and makes a PIL image only when asked, after reading the image's
size from its header and refusing one past `max_pixels`.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_MAX_PIXELS", "Display", "DisplayError", "richest_display"]

#: The most pixels `Display.image` decodes by default: a 50-megapixel photo fits, and
#: at 4 bytes a pixel a decoded image stays under 200 MiB.
DEFAULT_MAX_PIXELS = 50_000_000

#: The MIME types worth keeping, richest first.
_IMAGES = ("image/png", "image/jpeg")
_TEXTS = ("text/html", "text/markdown", "text/plain")


class DisplayError(ValueError):
    """A display that cannot be decoded as asked: not an image, malformed, or too large."""


@dataclass(frozen=True)
class Display:
    """One output the sandbox showed: `mime` and its `data` (bytes for images, text otherwise)."""

    mime: str
    data: bytes | str

    @property
    def is_image(self) -> bool:
        return self.mime in _IMAGES

    def image(self, max_pixels: int = DEFAULT_MAX_PIXELS) -> Any:
        """The image as a PIL image (pillow needed), decoded only if its header declares at
        most `max_pixels` pixels; a larger one is a decompression bomb as far as codeward knows."""
        if not self.is_image or not isinstance(self.data, bytes):
            raise DisplayError(f"a {self.mime} display is not an image")
        try:
            from PIL import Image
        except ImportError as missing:
            raise DisplayError("decoding images needs pillow: pip install pillow") from missing
        try:
            with warnings.catch_warnings():  # codeward's own limit decides, below
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                image = Image.open(io.BytesIO(self.data))
        except Image.DecompressionBombError as error:
            raise DisplayError(f"the {self.mime} display is a decompression bomb: {error}") from None
        except Exception as error:  # pillow raises many types for a malformed file
            raise DisplayError(f"the {self.mime} display is not a readable image: {error}") from None
        width, height = image.size
        if width * height > max_pixels:
            raise DisplayError(
                f"the {self.mime} display declares {width}x{height} pixels, over the {max_pixels:,} allowed; "
                "pass a larger max_pixels to decode it anyway"
            )
        image.load()
        return image

    def __repr__(self) -> str:
        return f"Display({self.mime!r}, {len(self.data):,} {'bytes' if isinstance(self.data, bytes) else 'characters'})"


def richest_display(bundle: dict[str, Any]) -> Display | None:
    """The most useful item of a MIME bundle as it arrived: an image's bytes, else HTML,
    Markdown or plain text; None for a bundle with none of these or a malformed image."""
    for mime in _IMAGES:
        encoded = bundle.get(mime)
        if isinstance(encoded, str):
            try:
                return Display(mime, base64.b64decode(encoded, validate=False))
            except (binascii.Error, ValueError):
                return None
    for mime in _TEXTS:
        text = bundle.get(mime)
        if isinstance(text, str):
            return Display(mime, text)
    return None
