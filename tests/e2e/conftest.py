"""Shared pytest fixtures for the end-to-end suites: where the built binaries are, free ports.

Area-specific fixtures live in tests/e2e/<area>_fixtures.py and are imported by the test files.
"""
import os
import pathlib
import socket
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# How long a test waits for a Go component scripts/test.sh is still building (MODELFLEET_GO_AWAIT):
# within the timeout of the tests that need Prometheus (600 s).
GO_BUILD_WAIT_S = 480


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MODELFLEET_BUILD_DIR", ROOT / "build"))


def go_binary_path(name: str) -> pathlib.Path:
    """Where scripts/build-go-tools.sh puts a Go component (kube-apiserver, etcd, helm,
    prometheus...). scripts/test.sh runs tests while some are still being built. Those it lists in
    MODELFLEET_GO_BUILDING fail a test asking for them, as its module lacks the marker
    (go_components, prometheus_server) that would run it after that build. Those it lists in
    MODELFLEET_GO_AWAIT as NAME=STATUS_FILE are waited for: the build writes its exit status
    there when it ends (prometheus_server tests run last, so the build has usually ended)."""
    if name in os.environ.get("MODELFLEET_GO_BUILDING", "").split():
        pytest.fail(f"{name} is still being built: mark the test's module go_components (prometheus_server for "
                    "Prometheus)", pytrace=False)
    awaited = dict(item.split("=", 1) for item in os.environ.get("MODELFLEET_GO_AWAIT", "").split() if "=" in item)
    if name in awaited:
        status = pathlib.Path(awaited[name])
        deadline = time.monotonic() + GO_BUILD_WAIT_S
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(1)
        if not status.exists():
            pytest.fail(f"{name} was still being built after {GO_BUILD_WAIT_S} s", pytrace=False)
        if status.read_text().strip() != "0":
            pytest.fail(f"building {name} failed (exit status {status.read_text().strip()}): see its log beside "
                        f"{status}", pytrace=False)
    return build_dir() / "go" / "bin" / name


def go_binary(name: str) -> pathlib.Path:
    """go_binary_path(name), skipping the test where it is not built."""
    path = go_binary_path(name)
    if not path.exists():
        pytest.skip(f"{path} is not built (scripts/build-go-tools.sh)")
    return path


def pytest_collection_modifyitems(items):
    """The tests that need Prometheus run last in their pytest process, so that scripts/test.sh
    can build it beside the other cluster tests, which share the chart-installed cluster (`fleet`)
    with them."""
    items.sort(key=lambda item: item.get_closest_marker("prometheus_server") is not None)


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
