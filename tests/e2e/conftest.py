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


def go_binary_path(name: str) -> pathlib.Path:
    """Where scripts/build-go-tools.sh puts a Go component (kube-apiserver, etcd, helm,
    prometheus...). scripts/test.sh runs tests while some are still being built, and lists those
    in MODELFLEET_GO_BUILDING: a test asking for one of them fails, as its module lacks the marker
    (go_components, prometheus_server) that would run it after that build."""
    if name in os.environ.get("MODELFLEET_GO_BUILDING", "").split():
        pytest.fail(f"{name} is still being built: mark the test's module go_components (prometheus_server for "
                    "Prometheus)", pytrace=False)
    return build_dir() / "go" / "bin" / name


def go_binary(name: str) -> pathlib.Path:
    """go_binary_path(name), skipping the test where it is not built."""
    path = go_binary_path(name)
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
