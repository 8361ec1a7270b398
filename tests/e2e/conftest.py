"""Shared pytest fixtures for the end-to-end suites: where the built binaries are, free ports.

Area-specific fixtures live in tests/e2e/<area>_fixtures.py and are imported by the test files.
"""
import os
import pathlib
import socket

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MODELFLEET_BUILD_DIR", ROOT / "build"))


def go_binary(name: str) -> pathlib.Path:
    """A Go component (kube-apiserver, etcd, helm, prometheus...) that scripts/build-go-tools.sh
    builds: skips the test where it is not built. scripts/test.sh runs the tests that need none
    while that build is still going (MODELFLEET_GO_COMPONENTS=building): a test asking for one
    then fails, as its module must be marked go_components to run after the build."""
    if os.environ.get("MODELFLEET_GO_COMPONENTS") == "building":
        pytest.fail(f"{name} is still being built: mark the test's module go_components", pytrace=False)
    path = build_dir() / "go" / "bin" / name
    if not path.exists():
        pytest.skip(f"{path} is not built (scripts/build-go-tools.sh)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def build():
    return build_dir()


@pytest.fixture
def port():
    return free_port()


# The chart-installed operator on one cluster, shared by every module that takes `fleet` (a
# session fixture defined here once: a module importing it would get an instance of its own).
# Imported last: fleet_fixtures imports build_dir and free_port from this module.
from fleet_fixtures import fleet  # noqa: E402,F401
