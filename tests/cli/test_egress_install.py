"""`codeward egress install`, `egress where` and doctor's line: where codeward finds mitmdump, and how it installs one."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeward.cli import main
from codeward.egress import proxy
from codeward.egress.proxy import EgressUnavailable, default_proxy_home, install_proxy, mitmdump_path


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No mitmdump anywhere: not named, no install of codeward's own, none on PATH."""
    monkeypatch.delenv("CODEWARD_MITMDUMP", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def test_mitmdump_is_found_in_order_named_then_codewards_own_then_path(nowhere: Path, monkeypatch) -> None:
    with pytest.raises(EgressUnavailable, match="codeward egress install"):
        mitmdump_path()
    on_path = _program(nowhere / "bin" / "mitmdump")
    assert mitmdump_path() == str(on_path)
    own = _program(nowhere / "cache" / "codeward" / "egress-proxy" / "bin" / "mitmdump")
    assert default_proxy_home() == nowhere / "cache" / "codeward" / "egress-proxy"
    assert mitmdump_path() == str(own)
    named = _program(nowhere / "elsewhere" / "mitmdump")
    monkeypatch.setenv("CODEWARD_MITMDUMP", str(named))
    assert mitmdump_path() == str(named)
    monkeypatch.setenv("CODEWARD_MITMDUMP", str(nowhere / "missing"))
    with pytest.raises(EgressUnavailable, match="not an executable mitmdump"):
        mitmdump_path()  # a name that is wrong is told, never passed over for another


def test_install_proxy_makes_an_environment_of_its_own_and_installs_mitmproxy_there(
    tmp_path: Path, monkeypatch
) -> None:
    made, ran = [], []
    monkeypatch.setattr(proxy.venv.EnvBuilder, "create", lambda self, home: made.append((Path(home), self.with_pip)))
    monkeypatch.setattr(proxy.subprocess, "run", lambda command, check: ran.append((command, check)))
    home = tmp_path / "proxy-home"
    assert install_proxy(home) == home / "bin" / "mitmdump"
    assert made == [(home, True)]
    assert ran == [
        ([str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", proxy.MITMPROXY_REQUIREMENT], True)
    ]


def test_egress_install_calls_install_proxy_and_says_where_mitmdump_is(tmp_path: Path, monkeypatch, capsys) -> None:
    homes = []

    def install(home: Path | None = None) -> Path:
        homes.append(home)
        return _program(Path(home or tmp_path) / "bin" / "mitmdump")

    monkeypatch.setattr(proxy, "install_proxy", install)
    assert main(["egress", "install", "--home", str(tmp_path / "env")]) == 0
    shown = capsys.readouterr()
    assert homes == [tmp_path / "env"]
    assert f"mitmdump: {tmp_path / 'env' / 'bin' / 'mitmdump'}" in shown.out and "CODEWARD_MITMDUMP=" in shown.err


def test_egress_install_reports_a_failed_install_as_a_setup_step(tmp_path: Path, monkeypatch, capsys) -> None:
    def fail(home: Path | None = None) -> Path:
        raise OSError("no space left on device")

    monkeypatch.setattr(proxy, "install_proxy", fail)
    assert main(["egress", "install", "--home", str(tmp_path)]) == 2
    assert "no space left on device" in capsys.readouterr().err


def test_egress_where_prints_the_mitmdump_or_what_to_do(nowhere: Path, capsys) -> None:
    assert main(["egress", "where"]) == 2
    assert "codeward egress install" in capsys.readouterr().err
    found = _program(nowhere / "bin" / "mitmdump")
    assert main(["egress", "where"]) == 0
    assert capsys.readouterr().out.strip() == str(found)


def test_doctor_says_whether_the_egress_proxy_is_available(codeward, tmp_path: Path) -> None:
    empty = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/nonexistent", "CODEWARD_MITMDUMP": ""}
    done = codeward("doctor", **empty)
    out = " ".join(done.stdout.split())
    assert "– egress proxy:" in out and "→ codeward egress install" in out
    found = _program(tmp_path / "mitmdump")
    done = codeward("doctor", **{**empty, "CODEWARD_MITMDUMP": str(found)})
    assert f"✓ egress proxy: mitmdump at {found}" in " ".join(done.stdout.split())
