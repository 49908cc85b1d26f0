"""The host's side of a kernel sandbox: the bootstrap that sets it up, and the tool bridge.

`bootstrap_code()` is a cell that turns the codec's and the prelude's *source*
into a package and a module inside the kernel, so any kernel with IPython can be a sandbox.
`ToolBridge` places each tool (`TOOL_MODES`) and answers the sandbox's tool requests: it
decodes them without ever unpickling, checks the arguments against the tool's `inputs`, runs
the real tool here on the host (where its secrets, network and state stay) and replies with
the value or the error. A request for anything but a tool placed on the host is refused: a tool
placed in the sandbox is never run here for it, where it would act on the host instead.
"""

from __future__ import annotations

import ast
import logging
import time
from functools import cache
from pathlib import Path
from typing import Any

from codeward.effects import Steps, blocking
from codeward.executors import codec
from codeward.executors.base import FINAL_ANSWER_TOOL
from codeward.executors.codec import source as codec_source
from codeward.executors.files import beneath
from codeward.executors.kernel import prelude
from codeward.executors.kernel.cells import decoding, request_error
from codeward.executors.kernel.inline_tools import InlineToolRefused, inline_spec
from codeward.tools import FinalAnswerTool, Tool, ToolCalled, ToolCallError

__all__ = [
    "TOOL_MODES",
    "ToolBridge",
    "bootstrap_code",
    "cell_calling",
    "request_kind",
]

#: Where tools run: "auto" puts each inline where it can be shipped and on the host where it must
#: run (MCP tools, objects with state, async functions, what uses secrets or cannot be shipped);
#: "host" puts all on the host; "inline" ships all, refusing one that cannot be shipped.
TOOL_MODES = ("auto", "host", "inline")

logger = logging.getLogger(__name__)

_LOADER = """
import sys, types
from IPython import get_ipython

def load(name, source):
    module = sys.modules.get(name)
    if module is None or getattr(module, "_codeward_source", None) != source:  # a pooled sandbox may have it already
        module = types.ModuleType(name)
        exec(compile(source, "<" + name + ">", "exec"), module.__dict__)
        module._codeward_source = source
        sys.modules[name] = module
    return module

load("_codeward_beneath", BENEATH)
load("_codeward", PRELUDE).install(get_ipython(), load_codec("_codeward_codec", CODEC), allow_pickle=ALLOW_PICKLE)
"""


@cache
def _source(module_file: str) -> str:
    return Path(module_file).read_text(encoding="utf-8")


def bootstrap_code(*, allow_pickle: bool = False) -> str:
    """One cell that installs codeward's sandbox side, leaving no name in the model's namespace."""
    loader = (
        f"CODEC = {codec_source.module_sources()!r}\n"
        f"PRELUDE = {_source(prelude.__file__)!r}\n"
        f"BENEATH = {_source(beneath.__file__)!r}\n"
        f"ALLOW_PICKLE = {allow_pickle!r}\n{codec_source.LOADER}{_LOADER}"
    )
    return f"exec({loader!r}, {{}})"


def cell_calling(function: str, *arguments: Any) -> str:
    """A cell that calls one of the prelude's functions without binding any name; arguments go as literals."""
    return f"__import__('sys').modules['_codeward'].{function}({', '.join(map(repr, arguments))})"


def request_kind(prompt: str) -> tuple[str, str]:
    """Split a sandbox request into its kind and body; ('', '') for a prompt that is not ours."""
    if not prompt.startswith(prelude.REQUEST):
        return "", ""
    kind, _, body = prompt[len(prelude.REQUEST) :].partition(":")
    return kind, body


class ToolBridge:
    """The registered tools, described for the sandbox and run on its request."""

    def __init__(self, tools: dict[str, Tool], *, mode: str = "host", allow_pickle: bool = False) -> None:
        if mode not in TOOL_MODES:
            raise ValueError(f"tools_mode must be one of {', '.join(map(repr, TOOL_MODES))}, got {mode!r}")
        self.tools = dict(tools)
        self.mode = mode
        self.allow_pickle = allow_pickle
        specs = [_tool_spec(name, tool, mode, self.tools) for name, tool in self.tools.items()]
        #: The encoded descriptions, checked now so that a tool that cannot be sent fails before anything is.
        self.specs_text = codec.dumps(specs, allow_pickle=allow_pickle)
        #: Where each tool runs: "host", "inline" (in the sandbox), or "identity" (the plain final_answer).
        self.placement = {spec["name"]: spec["run"] for spec in specs}
        #: Whether the sandbox calls any of them on the host.
        self.runs_on_host = "host" in self.placement.values()
        #: How many calls of its tools the sandbox asked for (a block's usage counts its share).
        self.calls = 0

    def answer(self, prompt: str) -> str:
        """The reply to one request from the sandbox's code."""
        return blocking(self.answering(prompt))

    def answering(self, prompt: str) -> Steps[str]:
        """`answer`, as steps that yield the tool's call (`effects`): awaited, an async tool runs on the loop."""
        kind, body = request_kind(prompt)
        if kind != "tool":
            return request_error("call", "ToolCallError", "the sandbox can only call its tools")
        return (yield from self.answering_tool(body))

    def answer_tool(self, body: str) -> str:
        """The reply to one encoded tool request (``{"tool": name, "arguments": {...}}``)."""
        return blocking(self.answering_tool(body))

    def answering_tool(self, body: str, by: float | None = None) -> Steps[str]:
        """`answer_tool`, as steps that yield the tool's call. With `by` (a `time.monotonic()` instant,
        the block's deadline), a request whose reading ended past it is refused and its tool not run."""
        try:
            request = yield from decoding(body)  # allow_pickle stays off: bytes from a sandbox are never unpickled
            name, arguments = request["tool"], request["arguments"]
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise TypeError("a request names a tool and gives its arguments as a dict")
        except Exception as error:  # anything malformed is refused, whatever it was
            return request_error("call", "ToolCallError", f"malformed tool request: {error}")
        if by is not None and time.monotonic() > by:
            return request_error("call", "TimeoutError", "the block's time ran out while its tool request was read")
        return (yield from self._running(name, arguments))

    def _running(self, name: str, arguments: dict[Any, Any]) -> Steps[str]:
        tool = self.tools.get(name)
        if tool is None or self.placement.get(name) != "host":
            known = ", ".join(tool for tool, run in self.placement.items() if run == "host") or "none"
            return request_error(
                "call", "ToolCallError", f"there is no host tool named {name!r}; the tools are: {known}"
            )
        self.calls += 1
        try:
            bound = tool.bind_arguments((), arguments)
        except ToolCallError as error:
            return request_error("call", "ToolCallError", str(error))
        started = time.perf_counter()
        try:
            # through the tool's own __call__, which a wrapper may extend (batch audits)
            value = yield ToolCalled(tool, bound)
        except Exception as error:  # the tool's failure is the model's to handle, in the sandbox
            logger.info("tool %s failed after %.3f s: %s", name, time.perf_counter() - started, type(error).__name__)
            return request_error("tool", type(error).__name__, str(error), error)
        logger.info("tool %s ran for the sandbox in %.3f s", name, time.perf_counter() - started)
        try:
            return codec.dumps({"value": value}, allow_pickle=self.allow_pickle)
        except codec.CodecError as error:
            return request_error("tool", "CodecError", f"the tool's result cannot enter the sandbox: {error}")


def _tool_spec(name: str, tool: Tool, mode: str, tools: dict[str, Tool]) -> dict[str, Any]:
    """What the sandbox needs to define a tool: signature, docstring, where it runs, and for an inline
    tool its source and what that uses from its module. In "auto" a tool that cannot be shipped
    (`InlineToolRefused`, which says why) runs on the host instead."""
    final = name == FINAL_ANSWER_TOOL
    run = "identity" if final and type(tool) is FinalAnswerTool else mode
    spec = {"name": name, "final": final, "run": run, "source": None, "context": None, **_describe(tool)}
    if run == "auto":
        try:
            spec.update(inline_spec(name, tool, tools), run="inline")
        except InlineToolRefused as refused:
            logger.info("tool %s runs on the host: %s", name, refused.reason)
            spec["run"] = "host"
    elif run == "inline":
        spec.update(inline_spec(name, tool, tools))
    return spec


def _describe(tool: Tool) -> dict[str, Any]:
    """Signature and docstring, read back from the tool's own code prompt so they match what the model sees."""
    annotations: dict[str, str] = {}
    returns, doc = "Any", tool.description
    try:
        node = ast.parse(tool.to_code_prompt()).body[0]
    except SyntaxError:  # a default whose repr is not Python: keep the names, drop the hints
        node = None
    if isinstance(node, ast.FunctionDef):
        annotations = {a.arg: ast.unparse(a.annotation) for a in node.args.args if a.annotation}
        returns = ast.unparse(node.returns) if node.returns else returns
        doc = ast.get_docstring(node) or doc
    params = []
    for arg, spec in tool.inputs.items():
        param: dict[str, Any] = {"name": arg, "annotation": annotations.get(arg, "Any")}
        if spec.get("nullable") or "default" in spec:
            param["default"] = spec.get("default")
        params.append(param)
    return {"params": params, "returns": returns, "doc": doc}
