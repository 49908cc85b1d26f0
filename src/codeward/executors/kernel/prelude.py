"""codeward's side inside a kernel sandbox, run before any of the model's code.

The host sends this module's *source* when a kernel starts (see `bridge`), so a
sandbox needs no codeward install: it imports only the standard library, IPython
(already there: it is the kernel) and the value codec, which arrives the same way
and is handed to `install`. It lives in `sys.modules["_codeward"]`; the
only names the model's namespace gains are the variables, the tools and
`final_answer`.

Everything the sandbox asks of the host goes through the kernel's stdin channel
as an `input_request` whose prompt starts with `REQUEST`; the host answers only
those requests, and only for registered tools. A host with no such channel (E2B,
whose server relays only outputs) passes variables and tools in the cell instead,
reads codeward's reports from displays (`report_by_display`), has the time
limit enforced in here (`limit_time`), and takes tool requests as marked printed
lines, answering them with files it writes into the sandbox (`ask_by_output`).
"""

from __future__ import annotations

import builtins
import getpass
import glob
import importlib
import importlib.metadata
import inspect
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from types import ModuleType
from typing import Any, ClassVar

#: Prompt prefix of every request to the host; the host ignores any other prompt.
REQUEST = "\x1bcodeward:"

#: The file, in the folder `ask_by_output` names, where the host answers a printed request.
ANSWER_FILE = "{nonce}-{number}"

#: Marks payload entries (in execute replies) that carry codeward's values.
PAYLOAD_SOURCE = "codeward"


class FinalAnswerException(BaseException):
    """Raised by `final_answer(x)`: a BaseException, so `except Exception` cannot swallow it."""

    def __init__(self, value: Any) -> None:
        super().__init__("final_answer called")
        self.value = value


class ToolCallError(TypeError):
    """A tool was called with arguments that do not fit its description."""


class ToolError(Exception):
    """A tool failed on the host; `error_type` names the exception it raised there."""

    def __init__(self, message: str, error_type: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type


class _Sandbox:
    """The kernel's shell and the options the host chose, set once by `install`."""

    shell: Any = None
    codec: Any = None
    allow_pickle = False
    tools: ClassVar[dict[str, Any]] = {}
    by_display = False
    time_limit = 0.0
    timer_hooked = False
    announcing = False
    host_tools = False  # whether a tool runs on the host, so that cells announce their nonce
    ask: Any = None  # how a request reaches the host where it is not the kernel's stdin (the local worker)
    answered: tuple[Any] | None = None  # the cell's final answer, kept until reported (see `make_tool`)
    home = ""  # the working folder `ex.files` reaches: where the kernel started, whatever the code's chdir


def install(shell: Any, codec: ModuleType, *, allow_pickle: bool = False) -> None:
    """Hook into the IPython shell: final answers, last values, and no `input()` for the model.

    Installing again (a pooled sandbox was set up before its executor came) only
    updates the settings: the hooks are registered once.
    """
    first = _Sandbox.shell is not shell
    _Sandbox.home = _Sandbox.home or os.getcwd()
    _Sandbox.shell = shell
    _Sandbox.codec = codec
    _Sandbox.allow_pickle = allow_pickle
    codec.restore_loaded_classes()
    if not first:
        return
    shell.set_custom_exc((FinalAnswerException,), _report_final_answer)
    shell.events.register("pre_run_cell", _before_cell)
    shell.events.register("post_run_cell", _report_last_value)


def _ask_host(kind: str, body: str = "") -> str:
    if _Sandbox.ask is not None:
        asked: str = _Sandbox.ask(kind, body)
        return asked
    answer: str = _Sandbox.shell.kernel.raw_input(f"{REQUEST}{kind}:{body}")
    return answer


def _write_payload(**entry: Any) -> None:
    if _Sandbox.by_display:
        _publish({REPORT_MIME: json.dumps({"source": PAYLOAD_SOURCE, **entry})})
    else:
        _Sandbox.shell.payload_manager.write_payload({"source": PAYLOAD_SOURCE, **entry})


def _before_cell(info: Any = None) -> None:
    """One hook before each cell: no input() for the model, and no answer left from the last cell."""
    _Sandbox.answered = None
    _refuse_input(info)


def _report_final_answer(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
    _Sandbox.answered = None
    _report_answer(getattr(value, "value", None))
    return []


def _report_answer(answer: Any) -> None:
    _report("final", "the final answer", answer)


def _report_last_value(result: Any) -> None:
    if _Sandbox.answered is not None:  # an answer given, then caught by the code (a bare except): still the answer
        (answer,) = _Sandbox.answered
        _Sandbox.answered = None
        _report_answer(answer)
        return
    value = getattr(result, "result", None)
    if value is None or not getattr(result, "success", False):
        return
    _report("value", "the last expression's value", value)


def _report(key: str, what: str, value: Any) -> None:
    """Send `value` to the host under `key`. An interrupt (the time limit) that lands while it is
    encoded is said as one: IPython's hooks report an exception raised in them and carry on, so the
    cell would otherwise end as if it had finished, without its value."""
    try:
        _write_payload(**{key: _Sandbox.codec.dumps(value)})
    except KeyboardInterrupt:
        _write_payload(interrupted=key)
    except Exception as error:  # any encoder failure must reach the host as a readable message
        _write_payload(**{f"{key}_error": _cannot_leave(what, value, error)})


def _cannot_leave(what: str, value: Any, error: Exception) -> str:
    kind = type(value)
    return f"{what}, of type {kind.__module__}.{kind.__qualname__}, cannot leave the sandbox: {error}"


def _no_input(prompt: Any = "", *args: Any, **kwargs: Any) -> str:
    raise RuntimeError(
        "input() is not available here: no one is there to answer. Use the variables and tools you were given instead"
    )


def _refuse_input(info: Any = None) -> None:
    builtins.input = _no_input
    getpass.getpass = _no_input


# -- values and tools from the host --------------------------------------------


def load_variables(text: str | None = None) -> None:
    """Bind the variables the host prepared (fetched, unless the cell carries them) in the model's namespace."""
    if text is None:
        text = _ask_host("variables")
    _Sandbox.shell.user_ns.update(_Sandbox.codec.decode_variables(text, allow_pickle=_Sandbox.allow_pickle))


def load_tools(text: str | None = None) -> None:
    """Define one function per tool the host described (descriptions fetched, unless the cell carries them)."""
    if text is None:
        text = _ask_host("tools")
    specs = _Sandbox.codec.loads(text, allow_pickle=_Sandbox.allow_pickle)
    namespace = _Sandbox.shell.user_ns
    for name, stub in _Sandbox.tools.items():
        if namespace.get(name) is stub:
            del namespace[name]
    _Sandbox.tools = {spec["name"]: make_tool(spec) for spec in specs}
    _Sandbox.host_tools = any(spec["run"] == "host" for spec in specs)
    namespace.update(_Sandbox.tools)


def make_tool(spec: dict[str, Any], ending: type[BaseException] = FinalAnswerException) -> Any:
    """A function with the tool's name, signature and docstring that runs where the host chose.

    The final-answer tool raises `ending` with its value, which the sandbox catches.
    """
    name, run, final = spec["name"], spec["run"], spec["final"]
    signature = _signature(spec)
    target: Any = _define_inline(name, spec["source"], spec["context"]) if run == "inline" else None
    single = _single_positional(signature)

    def tool(*args: Any, **kwargs: Any) -> Any:
        if single is not None and len(args) == 1 and not kwargs:  # what bind gives, without its walk
            arguments, positional, keywords = {single: args[0]}, args, {}
        else:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise ToolCallError(f"{name}(): {error}") from None
            arguments, positional, keywords = bound.arguments, bound.args, bound.kwargs
        if run == "host":
            value = _call_host(name, dict(arguments))
        elif run == "inline":
            value = target(*positional, **keywords)
        else:  # "identity": the plain final_answer tool
            value = next(iter(arguments.values()), None)
        if final:
            if ending is FinalAnswerException:  # recorded, for a kernel whose code catches the exception
                _Sandbox.answered = (value,)
            raise ending(value)
        return value

    tool.__name__ = tool.__qualname__ = name
    tool.__module__ = "__main__"
    tool.__doc__ = spec["doc"]
    tool.__signature__ = signature  # type: ignore[attr-defined]
    return tool


def _single_positional(signature: inspect.Signature) -> str | None:
    """The input that one positional argument alone fills, where the others have defaults (the usual
    call, ``final_answer(x)``): `bind` takes as long as a tiny block's own code to say so."""
    params = list(signature.parameters.values())
    if not params or params[0].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
        return None
    if any(param.default is inspect.Parameter.empty for param in params[1:]):
        return None
    return params[0].name


def _signature(spec: dict[str, Any]) -> inspect.Signature:
    kind: Any = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params: list[inspect.Parameter] = []
    for param in spec["params"]:
        default = param.get("default", inspect.Parameter.empty)
        if default is inspect.Parameter.empty and params and params[-1].default is not inspect.Parameter.empty:
            kind = inspect.Parameter.KEYWORD_ONLY  # a required input after an optional one
        params.append(inspect.Parameter(param["name"], kind, default=default, annotation=param["annotation"]))
    return inspect.Signature(params, return_annotation=spec["returns"])


def _define_inline(name: str, source: str, context: dict[str, Any]) -> Any:
    """Run a tool's shipped source in a namespace of its own and return the function it defines.

    The namespace first gets what the source uses from its module on the host
    (`context`): its imports, its constants (decoded, never unpickled) and the
    other tools it calls.
    """
    namespace: dict[str, Any] = {"__name__": f"_codeward_tool_{name}"}
    for bound, module, path in context["imports"]:
        namespace[bound] = _imported(name, module, path)
    for bound, text in context["constants"].items():
        namespace[bound] = _Sandbox.codec.loads(text)
    for other in context["tools"]:
        namespace[other] = _sibling_tool(other)
    exec(compile(source, f"<tool {name}>", "exec"), namespace)
    return namespace[name]


def _imported(tool: str, module: str, path: list[str]) -> Any:
    """A module, or a function or class reached from it by `path`, as the tool's module imported it."""
    try:
        found = importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"tool {tool!r} uses {module!r}, which this sandbox cannot import ({error}); install it in the "
            "sandbox before sending the tools, or stop using it in the tool"
        ) from None
    for attribute in path:
        found = getattr(found, attribute)
    return found


def _sibling_tool(name: str) -> Any:
    """Calls the sandbox's tool `name`, found when called: the tools are defined one after another."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return _Sandbox.tools[name](*args, **kwargs)

    return call


def _call_host(name: str, arguments: dict[str, Any]) -> Any:
    """Run a tool on the host and return its value, or raise its error here."""
    reply = _Sandbox.codec.loads(
        _ask_host("tool", _Sandbox.codec.dumps({"tool": name, "arguments": arguments})),
        allow_pickle=_Sandbox.allow_pickle,
    )
    if "error" not in reply:
        return reply["value"]
    error = reply["error"]
    if error["kind"] == "call":
        raise ToolCallError(error["message"])
    raise tool_failure(name, error)


def tool_failure(name: str, reply: dict[str, Any]) -> Exception:
    """The tool's own exception where it is a built-in type (so ``except ValueError`` works as it
    would on the host), from its own arguments where they came; otherwise a `ToolError` subclass
    named as the original, which derives from the original's nearest built-in base too, so the
    same ``except`` clauses catch it."""
    error_type, message = reply["type"], reply["message"]
    builtin = _builtin_exception(error_type)
    if builtin is not None:
        args = reply.get("args")
        try:
            return builtin(*args) if isinstance(args, list) else builtin(message)
        except Exception:  # a built-in whose constructor wants more (UnicodeDecodeError)
            pass
    error = _tool_error_class(error_type, _builtin_exception(reply.get("base", "")) or Exception)(
        f"tool {name!r} failed: {error_type}: {message}"
    )
    error.error_type = error_type
    return error


def _builtin_exception(name: str) -> type[Exception] | None:
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, Exception) and found.__module__ == "builtins":
        return found
    return None


_TOOL_ERROR_CLASSES: dict[tuple[str, type[Exception]], type[ToolError]] = {}


def _tool_error_class(error_type: str, base: type[Exception]) -> type[ToolError]:
    """One class per name and base, so the same failure is the same type each time it is raised."""
    key = (error_type if error_type.isidentifier() else "ToolError", base)
    if key not in _TOOL_ERROR_CLASSES:
        bases = (ToolError,) if base is Exception else (ToolError, base)
        try:
            _TOOL_ERROR_CLASSES[key] = type(key[0], bases, {"__module__": "codeward.tools"})
        except TypeError:  # a base whose layout cannot be mixed in
            _TOOL_ERROR_CLASSES[key] = type(key[0], (ToolError,), {"__module__": "codeward.tools"})
    return _TOOL_ERROR_CLASSES[key]


# -- hosts with no channel back (E2B) ---------------------------------------------

#: The display type that carries codeward's reports when payloads do not reach the host.
REPORT_MIME = "application/vnd.codeward.report+json"


class TimeLimitExceeded(BaseException):
    """Raised into a cell that runs past `limit_time`'s limit; a BaseException, like final answers."""


def report_by_display() -> None:
    """Send final answers and last values as displays: relays that drop reply payloads still pass those."""
    _Sandbox.by_display = True


def _publish(bundle: dict[str, str]) -> None:
    from IPython.display import publish_display_data

    publish_display_data(bundle)  # type: ignore[no-untyped-call]


def limit_time(seconds: float) -> None:
    """Stop every later cell after `seconds` (0: no limit), from in here: for hosts that cannot interrupt in time.

    A timer armed before each cell raises `TimeLimitExceeded` in the cell's
    thread, which also wakes a blocking sleep; it is disarmed before the
    post-cell reports, so it never cuts one short.
    """
    if not _Sandbox.timer_hooked:
        signal.signal(signal.SIGALRM, _time_is_up)
        _Sandbox.shell.events.register("pre_run_cell", _arm_timer)
        _Sandbox.shell.events.callbacks["post_run_cell"].insert(0, _disarm_timer)
        _Sandbox.timer_hooked = True
    _Sandbox.time_limit = float(seconds)


def _arm_timer(info: Any = None) -> None:
    signal.setitimer(signal.ITIMER_REAL, _Sandbox.time_limit)


def _disarm_timer(result: Any = None) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def _time_is_up(signum: int, frame: Any) -> None:
    raise TimeLimitExceeded(f"the code ran past its time limit of {_Sandbox.time_limit:g} s")


def ask_by_output(folder: str) -> None:
    """Ask the host by printing marked lines, and read its answers from files it writes into `folder`:
    for hosts whose relay carries only outputs but that can write files into the sandbox (E2B).

    While a tool runs on the host, each cell's output starts with a fresh nonce; requests carry it,
    and the host takes no other, so text the code prints cannot pass for a request. The stream
    kept is the kernel's own, so code that redirects ``sys.stdout`` still reaches the host.
    """
    _Sandbox.ask = _OutputChannel(folder, sys.stdout)
    if not _Sandbox.announcing:
        _Sandbox.shell.events.register("pre_run_cell", _announce_cell)
        _Sandbox.announcing = True


def _announce_cell(info: Any = None) -> None:
    if isinstance(_Sandbox.ask, _OutputChannel) and _Sandbox.host_tools:  # no tool to call, no cost
        _Sandbox.ask.announce()


class _OutputChannel:
    """Requests as printed lines, answers as files (see `ask_by_output`)."""

    #: Seconds between looks for an answer: short at first, for fast tools, then longer.
    FIRST_POLL, LONGEST_POLL = 0.0002, 0.0005

    def __init__(self, folder: str, stream: Any) -> None:
        self.folder = folder
        self.stream = stream
        self.nonce = ""
        self.numbers = itertools.count(1)

    def announce(self) -> None:
        """Start the cell's output with its nonce; not flushed: it leaves with whatever is printed next."""
        self.nonce = secrets.token_hex(16)
        self.stream.write(f"{REQUEST}{self.nonce}:cell::\n")

    def __call__(self, kind: str, body: str) -> str:
        number = next(self.numbers)
        self.stream.write(f"{REQUEST}{self.nonce}:{kind}:{number}:{body}\n")
        self.stream.flush()
        return self._answer(os.path.join(self.folder, ANSWER_FILE.format(nonce=self.nonce, number=number)))

    def _answer(self, path: str) -> str:
        """Wait for the host's answer; the cell's time limit (`limit_time`) interrupts the wait."""
        delay = self.FIRST_POLL
        while True:
            answer = _whole_answer(path)
            if answer is not None:
                return answer
            time.sleep(delay)
            delay = min(delay * 1.5, self.LONGEST_POLL)


def _whole_answer(path: str) -> str | None:
    """The answer in `path` once it is all written (it starts with its length), removed; else None."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    size, _, body = data.partition(b"\n")
    if not size.isdigit() or len(body) != int(size):
        return None
    os.remove(path)
    return body.decode("utf-8")


# -- packages --------------------------------------------------------------------


def files(operation: str, *arguments: Any) -> None:
    """One `ex.files` call, done in here by `beneath` (no link followed, no ``..``), so the host never
    touches a path the sandbox can change. Data to write is asked for; a result goes back as the
    cell's value, through the codec and within the cell's output budget, and is not kept here."""
    beneath = sys.modules["_codeward_beneath"]
    if operation == "write":
        data = _Sandbox.codec.loads(_ask_host("file"))
        beneath.write(_Sandbox.home, arguments[0], data)
        return
    if operation not in ("read", "listing", "remove", "exists"):
        raise ValueError(f"no file operation {operation!r}")
    try:
        text = _Sandbox.codec.dumps(getattr(beneath, operation)(_Sandbox.home, *arguments))
    except beneath.TooLarge as error:  # the host names its budget
        text = _Sandbox.codec.dumps({"too_large": error.size})
    if operation == "listing" and len(text) > arguments[1]:  # the host takes a listing's text within its limit
        text = _Sandbox.codec.dumps({"too_large": len(text)})
    _write_payload(value=text)


def install_packages(packages: list[str], prefix: str | None = None) -> list[str]:
    """pip-install into this kernel's interpreter; return the top-level modules they provide.

    With `prefix` (a sandbox whose own environment is read-only), pip installs
    there and the new folders come first on ``sys.path``. pip still sees what the
    environment has, so a dependency the image already holds is not fetched again;
    but it cannot replace a version the image holds, so when it tries, the install
    runs again ignoring what is installed, putting everything needed in `prefix`.
    """
    before = _modules_by_distribution()
    done = _pip(packages, prefix)
    if done.returncode != 0 and prefix is not None and "Read-only file system" in done.stdout + done.stderr:
        done = _pip(["--ignore-installed", *packages], prefix)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {packages}:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    if prefix is not None:
        sys.path[:0] = [path for path in _prefix_paths(prefix) if path not in sys.path]
    importlib.invalidate_caches()
    after = _modules_by_distribution()
    asked = {_normal(p) for p in packages}
    return sorted(
        {module for dist, modules in after.items() if dist in asked or dist not in before for module in modules}
    )


def _pip(arguments: list[str], prefix: str | None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir"]
    environment = None
    if prefix is not None:
        command += ["--prefix", prefix]
        # What earlier installs put there counts as installed.
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(_prefix_paths(prefix))}
    return subprocess.run([*command, *arguments], capture_output=True, text=True, check=False, env=environment)


def _prefix_paths(prefix: str) -> list[str]:
    """The import folders pip made under `prefix` (their names depend on the Python and the platform)."""
    return sorted(glob.glob(os.path.join(glob.escape(prefix), "lib*", "python*", "*-packages")))


def _modules_by_distribution() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            found.setdefault(_normal(dist), set()).add(module)
    return found


def _normal(requirement: str) -> str:
    """A distribution name from a requirement, normalised as PEP 503 does."""
    name = requirement.strip()
    for stop in "<>=!~[;@ ":
        name = name.split(stop, 1)[0]
    return name.lower().replace("_", "-").replace(".", "-")
