"""Local stand-ins for the Dockerfiles' base images, built here because no container registry is reachable.

The trainer Dockerfiles start `FROM python:3.12.12-slim-bookworm` and `FROM
python:3.11.14-slim-bookworm`. A build on the Docker engine uses a local image
of that tag without pulling it, so each tag is made here: a Debian bookworm
root file system from `mmdebstrap --variant=minbase` (the host's own apt
sources) with the shared libraries CPython's modules load, the CPython build
of that minor version that pyenv provides on these machines copied to
/usr/local (its micro version is pyenv's, which the label says), `ensurepip`,
and the host's CA bundle and pip settings, so pip inside a build trusts what
the host's pip trusts. The Dockerfiles stay as they ship.

A stand-in is never pushed anywhere but the registry on 127.0.0.1. It carries
a label with the hash of everything it is made from (the packages, the hooks,
the Python, the apt sources, the CA bundle, the pip settings), and is made
again only when that hash changes: the engine's data root is kept under the tools'
cache, so a later run finds it there.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PYENV_VERSIONS = Path.home() / ".pyenv" / "versions"
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))
LABEL = "gke-finetune.stand-in"
BUILD_TIMEOUT = 900.0
# What the modules of a CPython build load (ldd of lib-dynload on these machines; Tk left
# out, as in the slim images), and what the slim images add: CA certificates, netbase, tzdata.
PACKAGES = ("ca-certificates", "netbase", "tzdata", "libssl3", "libffi8", "zlib1g", "libbz2-1.0", "liblzma5",
            "libsqlite3-0", "libreadline8", "libncursesw6", "libuuid1", "libexpat1", "libnsl2", "libtirpc3",
            "libcrypt1", "libgdbm6", "libgdbm-compat4")
# The image settings the official python images set (their Dockerfiles' ENV and CMD).
IMAGE_CHANGES = ("ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8",
                 'CMD ["python3"]')
IN_IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True)
class StandIn:
    tag: str  # what the Dockerfile's FROM names
    minor: str  # the CPython minor version it must hold


STAND_INS = (StandIn("python:3.12.12-slim-bookworm", "3.12"), StandIn("python:3.11.14-slim-bookworm", "3.11"))


class StandInError(RuntimeError):
    pass


def pyenv_python(minor: str) -> Path:
    """The newest pyenv CPython of `minor` (e.g. 3.12 -> ~/.pyenv/versions/3.12.1)."""
    found = sorted((p for p in PYENV_VERSIONS.glob(f"{minor}.*") if (p / "bin" / f"python{minor}").exists()),
                   key=lambda p: tuple(int(x) for x in p.name.split(".") if x.isdigit()))
    if not found:
        raise StandInError(f"e2e: no pyenv CPython {minor} in {PYENV_VERSIONS} for the {minor} base image stand-in")
    return found[-1]


def host_pip_trust() -> tuple[Path, str]:
    """The CA bundle the host's pip verifies with, and the pip settings to give the image.

    pip's own view of its configuration (`pip config list`: files and PIP_* variables), so
    whatever the host's pip trusts, the image's pip trusts, and an index other than PyPI's
    that the host uses is the image's too."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    settings: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        settings[name] = value.strip().strip("'\"")
    bundle = Path(settings.get("cert") or IN_IMAGE_BUNDLE)
    if not bundle.is_file():
        raise StandInError(f"e2e: the host's pip CA bundle {bundle} is not a file")
    lines = ["[global]", f"cert = {IN_IMAGE_BUNDLE}"]
    lines += [f"{name} = {settings[name]}" for name in ("index-url", "extra-index-url", "trusted-host",
                                                         "default-timeout") if settings.get(name)]
    return bundle, "\n".join(lines) + "\n"


def _apt_sources() -> Path:
    for path in APT_SOURCES:
        if path.is_file() and path.read_text().strip():
            return path
    raise StandInError(f"e2e: none of {[str(p) for p in APT_SOURCES]} names the apt sources for mmdebstrap")


def recipe_key(stand_in: StandIn) -> str:
    """The hash of what the stand-in is made of: packages, hooks, image settings, the Python, the apt
    sources, the CA bundle and pip settings; not of this module's text, whose comments change nothing."""
    python = pyenv_python(stand_in.minor)
    bundle, pip_conf = host_pip_trust()
    digest = hashlib.sha256()
    recipe = json.dumps([stand_in.tag, PACKAGES, IMAGE_CHANGES, _hooks(python, stand_in.minor, bundle, pip_conf)])
    for part in (recipe.encode(), _apt_sources().read_bytes(), bundle.read_bytes()):
        digest.update(part + b"\0")
    return digest.hexdigest()[:16]


def _hooks(python: Path, minor: str, bundle: Path, pip_conf: str) -> list[str]:
    """mmdebstrap customize hooks ($1 is the new root): CPython into /usr/local, pip, trust."""
    q = shlex.quote
    stdlib = f"./lib/python{minor}"
    return [
        # The interpreter, its shared library and standard library; not the packages pyenv's
        # own site-packages holds, nor the test suite.
        f"tar -C {q(str(python))} {q(f'--exclude={stdlib}/site-packages/*')} {q(f'--exclude={stdlib}/test')}"
        " --exclude=__pycache__ --exclude='*.a' -cf - . | tar -C \"$1/usr/local\" -xf -",
        'chroot "$1" ldconfig',
        f'ln -sf python{minor} "$1/usr/local/bin/python3" && ln -sf python{minor} "$1/usr/local/bin/python"',
        f'mkdir -p "$1/etc/ssl/certs" && cp {q(str(bundle))} "$1{IN_IMAGE_BUNDLE}"',
        f'printf %s {q(pip_conf)} > "$1/etc/pip.conf"',
        f'chroot "$1" /usr/local/bin/python{minor} -m ensurepip --default-pip',
        f'ln -sf pip{minor} "$1/usr/local/bin/pip" && ln -sf pip{minor} "$1/usr/local/bin/pip3"',
        'rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/lib/apt/lists/"*',
    ]


def build(docker: list[str], stand_in: StandIn, log: Path) -> str:
    """Make the stand-in and import it under its tag; its image id."""
    python = pyenv_python(stand_in.minor)
    bundle, pip_conf = host_pip_trust()
    key = recipe_key(stand_in)
    with tempfile.TemporaryDirectory(prefix="stand-in-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        argv = ["mmdebstrap", "--variant=minbase", "--mode=root", f"--include={','.join(PACKAGES)}",
                *[f"--customize-hook={h}" for h in _hooks(python, stand_in.minor, bundle, pip_conf)],
                "bookworm", str(rootfs), str(_apt_sources())]
        with log.open("ab") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT)
        if done.returncode != 0:
            raise StandInError(f"e2e: mmdebstrap for {stand_in.tag} exited {done.returncode} (log: {log})")
        changes = [*IMAGE_CHANGES, f"LABEL {LABEL}={key}", f"LABEL {LABEL}.python={python.name}"]
        imported = subprocess.run([*docker, "import", *[a for c in changes for a in ("--change", c)], str(rootfs),
                                   stand_in.tag], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if imported.returncode != 0:
        raise StandInError(f"e2e: docker import of {stand_in.tag} failed: {imported.stderr.strip()}")
    return imported.stdout.strip()


def current_key(docker: list[str], tag: str) -> str | None:
    """The recipe key of the local image `tag`, or None when there is no such image."""
    shown = subprocess.run([*docker, "image", "inspect", "--format", "{{json .Config.Labels}}", tag],
                           capture_output=True, text=True, timeout=60)
    if shown.returncode != 0:
        return None
    return (json.loads(shown.stdout) or {}).get(LABEL)


def ensure(docker: list[str], log: Path) -> dict[str, str]:
    """Every stand-in present and current; what was done for each tag (made, or kept)."""
    done = {}
    for stand_in in STAND_INS:
        if current_key(docker, stand_in.tag) == recipe_key(stand_in):
            done[stand_in.tag] = "kept"
        else:
            build(docker, stand_in, log)
            done[stand_in.tag] = "made"
    return done
