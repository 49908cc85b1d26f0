"""Wheels written by hand and a package index that serves them, so that installing
packages is tested with pip's real resolver and downloads, and no internet."""

from __future__ import annotations

import functools
import http.server
import threading
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def wheel(
    folder: Path,
    project: str,
    files: Mapping[str, str | bytes],
    requires: tuple[str, ...] = (),
    purelib: bool = True,
) -> Path:
    """A version-1.0 wheel of `project` holding `files` (paths inside the wheel), built with no tools."""
    module = project.replace("-", "_")
    info = f"{module}-1.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n"
    metadata += "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    contents: dict[str, str | bytes] = {
        **files,
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: {str(purelib).lower()}\n"
        "Tag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n",
    }
    contents[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*contents, f"{info}/RECORD"])
    path = folder / f"{module}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in contents.items():
            archive.writestr(name, content)
    return path


def tiny_wheel(folder: Path, requires: tuple[str, ...] = ()) -> Path:
    """`codeward-tinypkg`: a module whose ANSWER is 42."""
    return wheel(folder, "codeward-tinypkg", {"codeward_tinypkg/__init__.py": "ANSWER = 42\n"}, requires)


@contextmanager
def package_index(folder: Path, host: str) -> Iterator[str]:
    """Serve the wheels in `folder` as a PEP 503 simple index on `host`; yields the index URL."""
    simple = folder / "simple"
    for path in folder.glob("*.whl"):
        project = path.name.split("-")[0].replace("_", "-")
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / "index.html").write_text(f'<a href="../../{path.name}">{path.name}</a>\n')
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass
