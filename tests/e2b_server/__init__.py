"""A local server that speaks E2B's code-interpreter protocol over real IPython kernels.

It lets the unmodified `e2b-code-interpreter` SDK, and so codeward's E2B
executor, run offline: set ``E2B_DEBUG=true`` and ``E2B_SANDBOX_URL`` to the
server's `url`. Run it on its own with ``python -m tests.e2b_server``.
"""

from tests.e2b_server.server import E2BServer

__all__ = ["E2BServer"]
