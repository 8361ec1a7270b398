"""The Dockerfile's runtime images, checked without a container engine: each runtime stage copies a
binary that the build produces, installs the Debian package of every shared library that binary
loads (ldd here, dpkg -S to name the package), runs as a non-root user and has the binary as its
ENTRYPOINT."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, build_dir

DOCKERFILE = ROOT / "Dockerfile"

# stage -> the binary it ships (its path under the build tree, as in the build stage's /build).
RUNTIME_STAGES = {
    "server": "server/main/modelfleet-server",
    "router": "server/router/modelfleet-router",
    "operator": "operator/modelfleet-operator",
    "sync": "server/sync/modelfleet-sync",
}
BUILD_ROOT_IN_IMAGE = "/build/"
# Always present with the C library itself (package libc6, in every Debian image).
LIBC_PACKAGES = {"libc6"}
# CUDA libraries that no Debian package owns on a developer machine (they may come from NVIDIA's
# pip wheels there) and that the image takes from NVIDIA's Debian repository.
NVIDIA_PACKAGES = {
    "libcudart.so.13": "cuda-cudart-13-0",
    "libcublas.so.13": "libcublas-13-0",
    "libcublasLt.so.13": "libcublas-13-0",
    "libcudnn.so.9": "libcudnn9-cuda-13",
}


def instructions(text: str):
    """(stage, INSTRUCTION, arguments) for each instruction, continuation lines joined, comments
    dropped; stage is the name given by the last FROM ... AS name."""
    logical, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    stage = None
    for entry in logical:
        keyword, _, rest = entry.strip().partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.match(r"(\S+)(?:\s+AS\s+(\S+))?\s*$", rest.strip(), re.IGNORECASE)
            assert match, f"unparsable FROM: {entry}"
            stage = match.group(2)
        yield stage, keyword, rest.strip()


class Stage:
    def __init__(self, name):
        self.name = name
        self.base = None
        self.packages = set()
        self.copies = []  # (from stage or None, sources, destination)
        self.user = None
        self.entrypoint = None
        self.cmd = None
        self.env = {}
        self.runs = []


def parse(text: str) -> dict:
    stages = {}
    for stage_name, keyword, rest in instructions(text):
        if keyword == "ARG" and stage_name is None:
            continue
        if keyword == "FROM":
            stage = stages.setdefault(stage_name, Stage(stage_name))
            stage.base = rest.split()[0]
            continue
        stage = stages[stage_name]
        if keyword == "RUN":
            stage.runs.append(rest)
            for command in re.split(r"&&|;|\|\|", rest):
                words = command.split()
                if words[:1] == ["apt-get"] and "install" in words:
                    stage.packages.update(w for w in words[words.index("install") + 1:] if not w.startswith("-"))
        elif keyword == "COPY":
            words = rest.split()
            source_stage = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            paths = [w for w in words if not w.startswith("--")]
            stage.copies.append((source_stage, paths[:-1], paths[-1]))
        elif keyword == "USER":
            stage.user = rest
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = json.loads(rest)
        elif keyword == "CMD":
            stage.cmd = json.loads(rest)
        elif keyword == "ENV":
            stage.env.update(dict(pair.split("=", 1) for pair in rest.split()))
    return stages


STAGES = parse(DOCKERFILE.read_text())


def chain(stage: Stage):
    """The stage and the stages it is built FROM, nearest first."""
    while stage is not None:
        yield stage
        stage = STAGES.get(stage.base)


def installed_packages(stage: Stage) -> set:
    return set().union(*(s.packages for s in chain(stage)))


def package_of(library: pathlib.Path) -> str | None:
    """The Debian package that owns a library file, trying the path as ldd printed it, its real path
    and its twin across the merged /usr (/lib/x <-> /usr/lib/x)."""
    candidates = [str(library), str(library.resolve())]
    for path in list(candidates):
        if path.startswith("/usr/lib/"):
            candidates.append(path.removeprefix("/usr"))
        elif path.startswith("/lib/"):
            candidates.append("/usr" + path)
    for path in candidates:
        result = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].strip()
    return NVIDIA_PACKAGES.get(library.name)


def shared_libraries(binary: pathlib.Path) -> list:
    """(soname, resolved path) for each library ldd lists, except the vDSO and the dynamic loader."""
    result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True)
    libraries = []
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\S+)\s+=>\s+(\S+)\s+\(0x", line)
        if match:
            libraries.append((match.group(1), pathlib.Path(match.group(2))))
        else:
            assert "not found" not in line, f"{binary}: {line.strip()}"
    return libraries


def built(relative: str) -> pathlib.Path:
    binary = build_dir() / relative
    if not binary.exists():
        pytest.skip(f"{binary} is not built yet")
    return binary


def test_stages_parse():
    assert set(RUNTIME_STAGES) <= set(STAGES), f"runtime stages missing: {set(RUNTIME_STAGES) - set(STAGES)}"
    build = " ".join(STAGES["build"].runs)
    for stage, relative in RUNTIME_STAGES.items():
        name = pathlib.Path(relative).name
        assert re.search(rf"--target\b[^&]*\b{re.escape(name)}\b", build), f"the build stage does not build {name}"


@pytest.mark.parametrize("stage_name", sorted(RUNTIME_STAGES))
def test_runtime_stage_copies_its_binary_and_runs_it_as_non_root(stage_name):
    stage = STAGES[stage_name]
    relative = RUNTIME_STAGES[stage_name]
    name = pathlib.Path(relative).name
    copies = [(sources, dest) for source_stage, sources, dest in stage.copies if source_stage == "build"]
    assert copies == [([BUILD_ROOT_IN_IMAGE + relative], f"/usr/local/bin/{name}")], (
        f"stage {stage_name} should copy exactly {BUILD_ROOT_IN_IMAGE + relative} from the build stage: {copies}")
    assert stage.entrypoint == [f"/usr/local/bin/{name}"]
    user = next((s.user for s in chain(stage) if s.user), None)
    assert user is not None, f"stage {stage_name} has no USER"
    uid = user.split(":")[0]
    assert uid == "10001", f"stage {stage_name} runs as {user}, not uid 10001"
    # uid 10001 exists in the image (useradd in a base stage), so tools that look the user up work.
    assert any("useradd --uid 10001" in run for s in chain(stage) for run in s.runs)
    # Only the server carries CUDA.
    cuda = {p for p in installed_packages(stage) if re.match(r"(cuda-|libcublas|libcudnn)", p)}
    assert bool(cuda) == (stage_name == "server"), f"stage {stage_name} CUDA packages: {sorted(cuda)}"


def test_server_image_keeps_tf_serving_defaults():
    stage = STAGES["server"]
    assert stage.cmd == ["--port=8500", "--rest_api_port=8501"]
    assert stage.env.get("MODEL_NAME") == "model" and stage.env.get("MODEL_BASE_PATH") == "/models"


@pytest.mark.parametrize("stage_name", sorted(RUNTIME_STAGES))
def test_runtime_stage_installs_every_library_its_binary_loads(stage_name):
    if shutil.which("dpkg") is None or shutil.which("ldd") is None:
        pytest.skip("dpkg and ldd are needed to map libraries to Debian packages")
    binary = built(RUNTIME_STAGES[stage_name])
    packages = installed_packages(STAGES[stage_name])
    missing, unowned = {}, []
    for soname, path in shared_libraries(binary):
        package = package_of(path)
        if package is None:
            unowned.append(f"{soname} ({path})")
        elif package not in LIBC_PACKAGES and package not in packages:
            missing.setdefault(package, []).append(soname)
    assert not unowned, f"{binary.name}: no Debian package provides {unowned}; add it to NVIDIA_PACKAGES or the image"
    assert not missing, (f"stage {stage_name} lacks packages for libraries {binary.name} loads: "
                         + ", ".join(f"{p} ({', '.join(libs)})" for p, libs in sorted(missing.items())))
