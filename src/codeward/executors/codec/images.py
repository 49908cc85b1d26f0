"""PIL images: their raw pixels, mode, palette and the metadata the codec can carry.

PIL is never imported here: images are found by their module's name, and a payload's tag imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from . import wire
from .errors import CodecError
from .wire import Decoder, Encoder, Refused, dec_list, dec_shape, dec_str, tag, unb64


def encode(e: Encoder, v: Any) -> Any:
    """A value of PIL's: an image."""
    image_module = sys.modules.get("PIL.Image")
    if image_module is None or not isinstance(v, image_module.Image):
        return e.fallback(v, "only PIL images are carried from PIL")
    palette = v.palette
    info = []
    for key, value in v.info.items():
        try:  # metadata is carried where it can be; the pixels always are
            info.append([e.enc(key), e.enc(value)])
        except Refused:
            continue
    return tag(
        "image",
        mode=v.mode,
        size=list(v.size),
        b64=e.blob(v.tobytes()),
        info=tag("dict", v=info) if info else None,
        palette=[palette.mode, v.getpalette(palette.mode)] if palette is not None else None,
    )


def _dec_image(d: Decoder, obj: dict[str, Any]) -> Any:
    image_module = wire.import_library("PIL.Image")
    mode = dec_str(obj["mode"])
    width, height = dec_shape(obj["size"])
    data = unb64(obj["b64"])
    # Check the buffer against the size before PIL allocates anything.
    row = (width + 7) // 8 if mode == "1" else width * len(image_module.new(mode, (1, 1)).tobytes())
    if len(data) != row * height:
        raise CodecError(f"a {mode} image of {width}x{height} needs {row * height} bytes, payload has {len(data)}")
    image = image_module.frombytes(mode, (width, height), data) if data else image_module.new(mode, (width, height))
    if obj.get("palette") is not None:
        palette_mode, palette = dec_list(obj["palette"])
        image.putpalette(palette, rawmode=dec_str(palette_mode))
    if obj.get("info"):
        image.info.update(obj["info"])
    return image


DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {"image": _dec_image}
