"""`executor="e2b"`: E2B's cloud sandboxes through the `e2b-code-interpreter` SDK.

`executor` drives a sandbox's code contexts (the same prelude and value codec as the
kernel sandboxes); `output` reads what a cell sends back and finds the host tool
requests in it; `calls` makes its SDK calls with the sync SDK for `run` and the
async one for `arun`. Importing this package imports the SDK.
"""

from codeward.executors.e2b.executor import E2BExecutor

__all__ = ["E2BExecutor"]
