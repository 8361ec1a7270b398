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
