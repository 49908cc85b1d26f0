"""The codec's two public exceptions, in a module of their own so that every other module can raise them."""

from __future__ import annotations


class CodecError(TypeError):
    """A value that cannot be carried, or a payload that cannot be decoded."""


class CodecWarning(UserWarning):
    """A value was decoded as something plainer than it was sent (e.g. a dataclass as a dict)."""


# Both are the package's own names (``codeward.executors.codec.CodecError``, ``_codeward_codec.CodecError``
# in a sandbox), which is how tracebacks, reprs and pickles name them.
CodecError.__module__ = CodecWarning.__module__ = __package__ or __name__
