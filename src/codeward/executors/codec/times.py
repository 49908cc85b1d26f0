"""Time: datetime, date, time and timedelta, and the time zones they carry (fixed offsets and zoneinfo keys).

A datetime or time travels as its naive ISO text, its zone and its fold. pandas values with a
zone (`frames`) use the same zone forms, pytz zones included where pandas holds them.
"""

from __future__ import annotations

import datetime as _dt
import sys
import zoneinfo
from collections.abc import Callable
from typing import Any

from . import wire
from .errors import CodecError
from .wire import Decoder, Encoder, Refused, dec_int, dec_list, dec_str, tag


def enc_tz(tz: Any, *, pytz_zones: bool = False) -> Any:
    """A time zone as JSON: fixed offsets (UTC included) and zoneinfo zones by key.

    pandas before 3 gives tz-aware columns pytz zones, so those are carried by key too where
    pandas holds them (``pytz_zones``); a datetime holding a pytz zone is refused, as its
    offset depends on how it was localized.
    """
    if tz is None:
        return None
    if type(tz) is _dt.timezone:
        offset, *name = tz.__getinitargs__()  # type: ignore[attr-defined]
        return {"offset": _td_parts(offset), "name": name[0] if name else None}
    if type(tz) is zoneinfo.ZoneInfo and tz.key is not None:
        return {"key": tz.key}
    if pytz_zones and type(tz).__module__.startswith("pytz") and isinstance(getattr(tz, "zone", None), str):
        return {"key": tz.zone, "lib": "pytz"}
    raise Refused(tz, "only datetime.timezone offsets and zoneinfo.ZoneInfo zones with a key are carried")


def _td_parts(td: _dt.timedelta) -> list[int]:
    return [td.days, td.seconds, td.microseconds]


def _enc_with_tz(kind: str) -> Callable[[Encoder, Any], Any]:
    def encode(e: Encoder, v: Any) -> Any:
        try:
            tz = enc_tz(v.tzinfo)
        except Refused as exc:
            raise Refused(v, exc.reason) from None
        return tag(kind, v=v.replace(tzinfo=None).isoformat(), tz=tz, fold=v.fold)

    return encode


def _enc_tz_value(e: Encoder, v: Any) -> Any:
    return tag("tz", tz=enc_tz(v))


def _dec_td(x: Any) -> _dt.timedelta:
    days, seconds, micros = (dec_int(p) for p in dec_list(x))
    return _dt.timedelta(days=days, seconds=seconds, microseconds=micros)


def dec_tz(x: Any) -> _dt.tzinfo | None:
    if x is None:
        return None
    if "key" in x:
        if x.get("lib") == "pytz" and wire.importable("pytz"):
            # pytz knows its keys; unknown ones raise
            zone: _dt.tzinfo = sys.modules["pytz"].timezone(dec_str(x["key"]))
            return zone
        try:  # zoneinfo validates keys: normalized relative paths only
            return zoneinfo.ZoneInfo(dec_str(x["key"]))
        except zoneinfo.ZoneInfoNotFoundError:
            raise CodecError(f"time zone {x['key']!r} is unknown here (no tz database? install tzdata)") from None
    offset = _dec_td(x["offset"])
    return _dt.timezone(offset) if x.get("name") is None else _dt.timezone(offset, dec_str(x["name"]))


def _dec_with_tz(parse: Callable[[str], Any]) -> Callable[[Decoder, dict[str, Any]], Any]:
    def decode(d: Decoder, obj: dict[str, Any]) -> Any:
        return parse(dec_str(obj["v"])).replace(tzinfo=dec_tz(obj.get("tz")), fold=obj.get("fold", 0))

    return decode


ENCODERS: dict[type, Callable[[Encoder, Any], Any]] = {
    _dt.datetime: _enc_with_tz("datetime"),
    _dt.time: _enc_with_tz("time"),
    _dt.date: lambda e, v: tag("date", v=v.isoformat()),
    _dt.timedelta: lambda e, v: tag("timedelta", v=_td_parts(v)),
    _dt.timezone: _enc_tz_value,
    zoneinfo.ZoneInfo: _enc_tz_value,
}

DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "datetime": _dec_with_tz(_dt.datetime.fromisoformat),
    "time": _dec_with_tz(_dt.time.fromisoformat),
    "date": lambda d, o: _dt.date.fromisoformat(dec_str(o["v"])),
    "timedelta": lambda d, o: _dec_td(o["v"]),
    "tz": lambda d, o: dec_tz(o["tz"]),
}
