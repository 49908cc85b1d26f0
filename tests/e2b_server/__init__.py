"""A local server that speaks E2B's code-interpreter protocol over real IPython kernels.

It lets the unmodified `e2b-code-interpreter` SDK, and so codeward's E2B
executor, run offline: set ``E2B_DEBUG=true`` and ``E2B_SANDBOX_URL`` to the
server's `url`. Run it on its own with ``python -m tests.e2b_server``.
"""

from __future__ import annotations

import atexit

from tests.e2b_server.server import E2BServer

__all__ = ["E2BServer", "shared_server"]

_shared: list[E2BServer] = []


def shared_server() -> E2BServer:
    """One server for the whole test process, started on first use and closed at exit."""
    if not _shared:
        _shared.append(E2BServer().start())
        atexit.register(_shared[0].close)
    return _shared[0]
