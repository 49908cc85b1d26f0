"""Attribute names no code in the local sandbox may read, whatever the object.

Its own module because three parts refuse them, each in its place: the policy at
compile time, the guards at run time (``getattr`` included), and the data policy
for names a library would look up on the code's behalf.
"""

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

__all__ = ["FORBIDDEN_ATTRIBUTES"]

#: Attributes that lead to frames, code objects or interpreter internals even
#: though they do not start with ``_``; refused at compile time and by `getattr`.
FORBIDDEN_ATTRIBUTES = frozenset(INSPECT_ATTRIBUTES) | {
    "f_back",
    "f_builtins",
    "f_code",
    "f_globals",
    "f_locals",
    "f_trace",
    "gi_frame",
    "gi_code",
    "gi_yieldfrom",
    "cr_frame",
    "cr_code",
    "cr_await",
    "ag_frame",
    "ag_code",
    "ag_await",
    "tb_frame",
    "tb_next",
    "func_globals",
    "func_code",
    "im_func",
    "im_self",
    "mro",
}
