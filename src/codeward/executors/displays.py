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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codeward.wording import a

__all__ = ["DEFAULT_MAX_PIXELS", "Display", "DisplayError", "richest_display"]

#: The most pixels `Display.image` decodes by default: a 50-megapixel photo fits, and
#: at 4 bytes a pixel a decoded image stays under 200 MiB.
DEFAULT_MAX_PIXELS = 50_000_000

#: The MIME types worth keeping, richest first.
_IMAGES = ("image/png", "image/jpeg")
#: The one pillow format each image MIME type is read as.
_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG"}
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
        most `max_pixels` pixels; a larger one is a decompression bomb as far as codeward knows.
        Whatever is wrong with the bytes, the error is a `DisplayError`."""
        return self._read(max_pixels, lambda image: image.load())

    def describe(self) -> str:
        """One line that stands for the display where it cannot be shown, as on a terminal.

        Never raises: an image whose bytes cannot be read is described as such. Its header is
        read and its file checked, but no pixels are decoded, so describing stays cheap.
        """
        if not self.is_image:
            return f"[{self.mime} display, {len(self.data):,} characters]"
        try:
            width, height = self._read(DEFAULT_MAX_PIXELS, lambda image: image.verify()).size
        except DisplayError as error:
            return f"[image that could not be decoded: {error}]"
        return f"[{self.mime} image, {width}x{height}]"

    def _read(self, max_pixels: int, finish: Callable[[Any], object]) -> Any:
        """The image, opened as the one format its MIME type names, its size checked, then
        `finish`ed (loaded or verified); any failure on the way is a `DisplayError`.

        Only that format's reader sees the bytes: pillow knows formats whose readers run
        programs (EPS runs Ghostscript), and a sandbox chooses what the bytes hold.
        """
        if not self.is_image or not isinstance(self.data, bytes):
            raise DisplayError(f"{a(self.mime)} display is not an image")
        try:
            from PIL import Image, UnidentifiedImageError
        except ImportError as missing:
            raise DisplayError("decoding images needs pillow: pip install pillow") from missing
        kind = _FORMATS[self.mime]
        try:
            with warnings.catch_warnings():  # codeward's own limit decides, below
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                image = Image.open(io.BytesIO(self.data), formats=[kind])
            self._check_size(image.size, max_pixels)
            finish(image)
        except DisplayError:
            raise
        except Image.DecompressionBombError as error:
            raise DisplayError(f"the {self.mime} display is a decompression bomb: {error}") from None
        except UnidentifiedImageError:
            raise DisplayError(f"the {self.mime} display's bytes are not a {kind} image") from None
        except Exception as error:  # pillow raises many types for a malformed file, some only once it reads pixels
            raise DisplayError(f"the {self.mime} display is not a readable image: {error}") from None
        return image

    def _check_size(self, size: tuple[int, int], max_pixels: int) -> None:
        width, height = size
        if width * height > max_pixels:
            raise DisplayError(
                f"the {self.mime} display declares {width}x{height} pixels, over the {max_pixels:,} allowed; "
                "pass a larger max_pixels to decode it anyway"
            )

    def to_dict(self) -> dict[str, str]:
        """The display as a saved run keeps it: an image's bytes in base64, a text as it came."""
        if isinstance(self.data, bytes):
            return {"mime": self.mime, "base64": base64.b64encode(self.data).decode("ascii")}
        return {"mime": self.mime, "text": self.data}

    @classmethod
    def from_dict(cls, record: Any) -> Display | None:
        """A display read back from a saved run, a file anyone may have written: None where malformed."""
        if not isinstance(record, dict) or not isinstance(record.get("mime"), str):
            return None
        if isinstance(record.get("text"), str):
            return cls(record["mime"], record["text"])
        encoded = record.get("base64")
        if not isinstance(encoded, str):
            return None
        try:
            return cls(record["mime"], base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            return None

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
