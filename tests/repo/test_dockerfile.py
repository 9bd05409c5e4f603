"""The container image, checked without a Docker engine.

Two halves:
- the Dockerfile is parsed and its contract checked (a pullable Debian base, a scratch
  runtime, non-root user, the upstream binary path as ENTRYPOINT, no bytecode writes, OCI
  labels, port 8080); the built image itself is tested by tests/image (make image-test);
- the installed console script is run the way the image runs it (no writable HOME,
  PYTHONDONTWRITEBYTECODE=1, no cluster) and must write nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
LAUNCHER = "/cluster-proportional-autoscaler"
SCRIPT = "cluster-proportional-autoscaler"


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


def _logical_lines(text: str) -> Iterator[str]:
    """Dockerfile lines with comments dropped and backslash continuations joined."""
    buf: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):  # also skipped inside a continuation
            continue
        if line.endswith("\\"):
            buf.append(line[:-1].strip())
            continue
        buf.append(line)
        yield " ".join(part for part in buf if part)
        buf = []
    if buf:
        yield " ".join(buf)


def parse_dockerfile(text: str) -> tuple[list[Instruction], list[Stage]]:
    """Return (instructions before the first FROM, stages)."""
    preamble: list[Instruction] = []
    stages: list[Stage] = []
    for line in _logical_lines(text):
        keyword, _, args = line.partition(" ")
        ins = Instruction(keyword.upper(), args.strip())
        if ins.keyword == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", ins.args, re.I)
            assert m, f"unparsable FROM: {ins.args}"
            stages.append(Stage(base=m.group(1), name=m.group(2)))
        elif stages:
            stages[-1].instructions.append(ins)
        else:
            preamble.append(ins)
    return preamble, stages


def parse_kv(args: str) -> dict[str, str]:
    """Parse `k=v k2="v 2"` (ENV/LABEL syntax) into a dict."""
    out: dict[str, str] = {}
    for m in re.finditer(r'([\w.\-]+)=("(?:[^"\\]|\\.)*"|\S*)', args):
        value = m.group(2)
        if value.startswith('"'):
            value = value[1:-1]
        out[m.group(1)] = value
    return out


@pytest.fixture(scope="module")
def dockerfile() -> tuple[list[Instruction], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final(dockerfile: tuple[list[Instruction], list[Stage]]) -> Stage:
    return dockerfile[1][-1]


def test_one_pullable_debian_base_and_a_scratch_runtime(
    dockerfile: tuple[list[Instruction], list[Stage]],
) -> None:
    preamble, stages = dockerfile
    assert len(stages) == 2, "expected a builder stage and a runtime stage"
    assert stages[0].name == "builder"
    args = {k: v for i in preamble if i.keyword == "ARG" for k, _, v in [i.args.partition("=")]}
    assert "BASE_IMAGE" in args, "the base image must be an ARG so it can be overridden"
    # A reference a user can pull as is: name:tag, no placeholder, no invented digest.
    assert re.fullmatch(r"[a-z0-9./-]+:[A-Za-z0-9._-]+", args["BASE_IMAGE"]), args["BASE_IMAGE"]
    assert args["BASE_IMAGE"] == "debian:bookworm-slim"
    assert stages[0].base == "${BASE_IMAGE}"
    assert stages[-1].base == "scratch", "the runtime holds only what rootfs.sh assembles"


def test_builder_assembles_the_target_platform_without_emulation(
    dockerfile: tuple[list[Instruction], list[Stage]],
) -> None:
    """The builder runs on the build machine's platform and assembles the TARGET
    platform's root filesystem with the code `make image` runs (image/ocibuild)."""
    _, stages = dockerfile
    raw = DOCKERFILE.read_text()
    assert "FROM --platform=$BUILDPLATFORM ${BASE_IMAGE} AS builder" in raw
    builder = stages[0]
    run = " ".join(builder.all("RUN"))
    assert "apt-get install -y --no-install-recommends python3 python3-pip mmdebstrap" in run
    assert 'python3 -m ocibuild rootfs --platform "$TARGETPLATFORM"' in run
    assert "TARGETPLATFORM" in builder.all("ARG")


def test_runtime_copies_only_the_assembled_rootfs(final: Stage) -> None:
    assert final.all("COPY") == ["--from=builder /rootfs /"]
    assert not final.all("RUN"), "scratch has no shell to RUN anything with"


def test_image_requirements_pin_the_runtime_dependencies() -> None:
    """image/requirements.txt pins every dependency of the package but the kubernetes
    client (which the daemon never imports in a Pod), each within pyproject's range."""
    from packaging.requirements import Requirement

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = {Requirement(d).name.lower(): Requirement(d) for d in deps}
    pins: dict[str, str] = {}
    for line in (REPO / "image" / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"not pinned with ==: {line}"
            pins[name.lower()] = version
    assert set(pins) == set(wanted) - {"kubernetes"}
    for name, version in pins.items():
        assert wanted[name].specifier.contains(version), (name, version, wanted[name])


def test_kubernetes_client_is_never_imported_in_cluster() -> None:
    """The image leaves the official client out; only kubeconfig exec/auth-provider
    plugins (outside a cluster) import it, lazily."""
    for path in (REPO / "cpa").glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"\s*(from|import)\s+kubernetes\b", line):
                assert path.name == "kubeconfig.py" and line.startswith("    "), (
                    f"{path.name}:{number} imports the kubernetes client: {line.strip()}")


def test_runs_as_nobody(final: Stage) -> None:
    users = final.all("USER")
    assert users, "runtime stage must set USER"
    assert users[-1] == "65534:65534"
    # Nothing after USER may need root.
    keywords = [i.keyword for i in final.instructions]
    after = keywords[keywords.index("USER") + 1 :]
    assert "RUN" not in after and "COPY" not in after


def test_entrypoint_is_the_upstream_binary_path(final: Stage) -> None:
    entrypoints = final.all("ENTRYPOINT")
    assert len(entrypoints) == 1
    assert json.loads(entrypoints[0]) == [LAUNCHER], "ENTRYPOINT must be exec (JSON) form"
    assert not final.all("CMD"), "CMD would add arguments to manifests that set only args"


def test_launcher_links_the_console_script() -> None:
    from ocibuild import python

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[SCRIPT] == "cpa.cli:daemon_main"
    assert python.ENTRYPOINTS[0] == SCRIPT == LAUNCHER.lstrip("/")


def test_cpvpa_links_the_vertical_console_script() -> None:
    """CPVA's manifests run ``command: [/cpvpa, ...]``: the same image serves them."""
    from ocibuild import python

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["cpvpa"] == "cpa.cli:vertical_main"
    assert "cpvpa" in python.ENTRYPOINTS
    assert python.ENTRYPOINTS[0] == SCRIPT  # the image's entrypoint stays the CPA


def _fake_install(root: Path) -> Path:
    """A site-packages under ``root`` with one distribution and its console scripts."""
    from ocibuild import python

    site = root / python.SITE.lstrip("/")
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text(
        "import sys\ndef main():\n    print('site' in sys.modules, sys.flags.no_site)\n"
        "    return 3\n")
    (site / "pkg-1.dist-info").mkdir()
    (site / "pkg-1.dist-info" / "entry_points.txt").write_text(
        "[console_scripts]\n" + "".join(f"{name} = pkg:main\n"
                                         for name in python.ENTRYPOINTS))
    (root / python.VENV.lstrip("/") / "bin").mkdir(parents=True)
    return site


def test_console_scripts_run_without_site_and_find_the_venvs_packages(
        tmp_path: Path) -> None:
    """The image's scripts start the interpreter with -S (no site module: ~2 ms of every
    start) and put the venv's site-packages on the path themselves."""
    from ocibuild import python

    site = _fake_install(tmp_path)
    names = python.write_scripts(tmp_path)
    assert sorted(names) == sorted(python.ENTRYPOINTS)
    script = (tmp_path / python.VENV.lstrip("/") / "bin" / SCRIPT).read_text()
    assert script.splitlines()[0] == f"#!{python.VENV}/bin/python3 -S"
    assert f'sys.path.append("{python.SITE}")' in script
    # Run as the image runs it, the in-image path standing for this test's.
    local = script.replace(python.SITE, str(site))
    proc = subprocess.run([sys.executable, "-S", "-c", local], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin"})
    assert (proc.returncode, proc.stdout) == (3, "False 1\n"), proc.stderr


def test_a_pth_file_stops_the_build_since_the_scripts_skip_site(tmp_path: Path) -> None:
    from ocibuild import python

    site = _fake_install(tmp_path)
    (site / "hook.pth").write_text("import os\n")
    with pytest.raises(SystemExit, match=r"\.pth files \(hook\.pth\)"):
        python.write_scripts(tmp_path)


def test_environment_prevents_writes(final: Stage) -> None:
    env: dict[str, str] = {}
    for args in final.all("ENV"):
        env.update(parse_kv(args))
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["HOME"] == "/tmp"
    assert env["PATH"].startswith("/opt/venv/bin:")
    workdirs = final.all("WORKDIR")
    assert workdirs and workdirs[-1] == "/tmp"


class _HostPython:
    """Stands for ocibuild's NativePython: this test's interpreter compiles."""

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, **extra}


def test_bytecode_replaces_the_sources_and_tracebacks_keep_file_and_line(
        tmp_path: Path) -> None:
    """Every module is compiled at build time and its source dropped: the image imports
    ``x.pyc`` in place of ``x.py`` (never compiling, never writing), and a traceback still
    names the in-image file and the line."""
    from ocibuild import python

    site = tmp_path / "opt" / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "mod.py").write_text("def boom():\n    x = 1\n    raise ValueError(x)\n")
    removed = python.compile_bytecode(_HostPython(), tmp_path,  # type: ignore[arg-type]
                                      (python.SITE.lstrip("/"),))
    assert removed == len("def boom():\n    x = 1\n    raise ValueError(x)\n")
    assert sorted(p.name for p in (site / "pkg").iterdir()) == ["__init__.pyc", "mod.pyc"]
    proc = subprocess.run(
        [sys.executable, "-B", "-c", "import pkg.mod, traceback\ntry:\n pkg.mod.boom()\n"
         "except ValueError:\n traceback.print_exc()"],
        env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
        check=True)
    assert f'File "{python.SITE}/pkg/mod.py", line 3, in boom' in proc.stderr, proc.stderr
    assert not list(site.rglob("__pycache__")), "bytecode written at run time"


def test_oci_labels(final: Stage) -> None:
    labels: dict[str, str] = {}
    for args in final.all("LABEL"):
        labels.update(parse_kv(args))
    # created: the commit's time, set by `make image` (SOURCE_DATE_EPOCH), not the clock.
    for key in ("title", "description", "licenses", "version", "revision", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), f"missing label {key}"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_exposes_health_port(final: Stage) -> None:
    assert final.all("EXPOSE") == ["8080"]


def test_dockerignore_is_an_allow_list() -> None:
    lines = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "exclude everything first, then allow what the build needs"
    for needed in ("!pyproject.toml", "!cpa/", "!image/requirements.txt", "!image/ocibuild/",
                   "!LICENSE"):
        assert needed in lines
    assert "**/__pycache__" in lines


# --- the console script, run as the image runs it ---------------------------------------

_SKIP_DIRS = {".git", ".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def _snapshot(root: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = os.path.relpath(dirpath, root)
        found.add(rel + "/")
        found.update(os.path.join(rel, f) for f in filenames)
    return found


@pytest.fixture
def script() -> str:
    path = shutil.which(SCRIPT)
    if path is None:
        pytest.fail(
            f"console script {SCRIPT!r} not on PATH: install the package first "
            "(pip install -e .), as CI does"
        )
    return path


@pytest.fixture
def image_like_env(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, Path]]:
    """Environment of the container: unwritable HOME and cwd, no cluster, no bytecode."""
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    # A pyenv/venv interpreter may need these to find itself; never a kubeconfig.
    for key in ("VIRTUAL_ENV", "PYENV_VERSION", "PYENV_ROOT"):
        if key in os.environ:
            env[key] = os.environ[key]
    home.chmod(stat.S_IRUSR | stat.S_IXUSR)  # 0o500, as the image's / is for uid 65534
    cwd.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        yield env, home, cwd
    finally:
        home.chmod(0o700)
        cwd.chmod(0o700)


def _run(
    script: str, args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [script, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def _expected_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_version_writes_nothing(
    script: str, image_like_env: tuple[dict[str, str], Path, Path]
) -> None:
    env, home, cwd = image_like_env
    before_repo, before_home, before_cwd = _snapshot(REPO), _snapshot(home), _snapshot(cwd)

    result = _run(script, ["--version"], env, cwd)

    assert result.returncode == 0, result.stderr
    assert _expected_version() in result.stdout + result.stderr
    new_in_repo = sorted(_snapshot(REPO) - before_repo)
    assert not new_in_repo, f"wrote into the repository (bytecode?): {new_in_repo}"
    assert _snapshot(home) == before_home, "wrote into HOME"
    assert _snapshot(cwd) == before_cwd, "wrote into the working directory"


def test_missing_target_is_a_validation_error_and_writes_nothing(
    script: str, image_like_env: tuple[dict[str, str], Path, Path]
) -> None:
    env, home, cwd = image_like_env
    before_repo, before_home = _snapshot(REPO), _snapshot(home)

    # The DNS addon's command line without --target.
    result = _run(
        script,
        [
            "--namespace=kube-system",
            "--configmap=kube-dns-autoscaler",
            '--default-params={"linear":{"coresPerReplica":256,"nodesPerReplica":16}}',
            "--logtostderr=true",
            "--v=2",
        ],
        env,
        cwd,
    )

    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "target" in (result.stdout + result.stderr).lower()
    new_in_repo = sorted(_snapshot(REPO) - before_repo)
    assert not new_in_repo, f"wrote into the repository (bytecode?): {new_in_repo}"
    assert _snapshot(home) == before_home, "wrote into HOME"


def test_unknown_flag_is_a_usage_error(
    script: str, image_like_env: tuple[dict[str, str], Path, Path]
) -> None:
    env, _, cwd = image_like_env
    result = _run(script, ["--no-such-flag=1", "--target=deployment/x"], env, cwd)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
