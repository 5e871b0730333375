"""docker-compose.yml read as Compose reads it, and turned into local process command lines.

Container images cannot be pulled here, so the deployment test runs each service's own command
line as a local process. This module does the two steps in between:

* :func:`load_compose` - parse the YAML (anchors and ``<<`` merge keys resolved by PyYAML) and
  interpolate every string value with the variables of an env file, by the Compose
  Specification's rules (:func:`interpolate`, :func:`read_env_file`).
* :func:`localize` - rewrite only what cannot be the same outside a container, and record every
  rewrite so the test can assert the list: the host name ``redis`` and its port in URLs, the
  published port a server listens on (a free loopback port, bound to 127.0.0.1), and container
  paths (a path under a volume's mount point -> that volume's local directory; any other
  container path -> a per-service directory standing for the container's own filesystem).

What the compose file does not say comes from the image: working directory, environment and
default command. For ``knights-tour:latest`` that is read from our Dockerfile; for the two
public images it is :data:`PUBLIC_IMAGES` (their Dockerfiles).

References
----------
Compose Specification, "Interpolation" (12-interpolation.md) and "Services: volumes".
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (where docker-compose.yml, .env.example and the Dockerfile are)."""

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Image:
    """What an image contributes to a container: working dir, environment, default command."""

    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] | None = None


PUBLIC_IMAGES = {
    # official redis image: `WORKDIR /data` (the data volume); the compose file gives the command
    "redis:7": Image(workdir="/data"),
    # mher/flower's Dockerfile: `WORKDIR /data` and `CMD ["celery", "flower"]`, configured by the
    # environment (CELERY_BROKER_URL read by Celery, FLOWER_* options read by Flower)
    "mher/flower:2.0": Image(workdir="/data", cmd=["celery", "flower"]),
}


class InterpolationError(ValueError):
    """A ``${VAR:?message}`` / ``${VAR?message}`` whose variable is missing, or bad syntax."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", re.S)


def _closing_brace(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``${`` whose body starts at ``start`` (nesting allowed)."""
    depth, i = 1, start
    while i < len(text):
        if text.startswith("$$", i):
            i += 2
            continue
        if text.startswith("${", i):
            depth, i = depth + 1, i + 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise InterpolationError(f"unclosed '${{' in {text!r}")


def _braced(body: str, env: dict[str, str]) -> str:
    m = _BRACED.fullmatch(body)
    if not m:
        raise InterpolationError(f"invalid interpolation format ${{{body}}}")
    name, op, arg = m.groups()
    value = env.get(name)
    is_set, non_empty = value is not None, bool(value)
    if op is None:
        return value or ""  # Compose warns and substitutes an empty string
    if op in (":-", "-"):
        return value if (non_empty if op == ":-" else is_set) else interpolate(arg, env)
    if op in (":?", "?"):
        if not (non_empty if op == ":?" else is_set):
            raise InterpolationError(
                f"required variable {name} is missing a value: {interpolate(arg, env)}"
            )
        return value or ""
    return interpolate(arg, env) if (non_empty if op == ":+" else is_set) else ""


def interpolate(text: str, env: dict[str, str]) -> str:
    """``text`` with Compose interpolation applied, variables looked up in ``env``.

    Supports ``$VAR``, ``${VAR}``, ``${VAR:-default}``/``${VAR-default}``,
    ``${VAR:?error}``/``${VAR?error}``, ``${VAR:+alt}``/``${VAR+alt}``, nesting inside the
    operand, and ``$$`` for a literal ``$``. A ``$`` not followed by a name or ``{`` is kept.

    Raises
    ------
    InterpolationError
        For a required variable that is unset (or empty, with ``:?``), naming its message.

    References
    ----------
    Compose Specification, "Interpolation".
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
        elif text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            end = _closing_brace(text, i + 2)
            out.append(_braced(text[i + 2 : end], env))
            i = end + 1
        elif m := _NAME.match(text, i + 1):
            out.append(env.get(m.group(0)) or "")
            i = m.end()
        else:
            out.append("$")
            i += 1
    return "".join(out)


def interpolate_tree(node: Any, env: dict[str, str]) -> Any:
    """Every string value of a parsed YAML tree interpolated (mapping keys are left alone)."""
    if isinstance(node, dict):
        return {k: interpolate_tree(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate_tree(v, env) for v in node]
    return interpolate(node, env) if isinstance(node, str) else node


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a Compose env file (``#`` comments, blank lines, quoted values)."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not _NAME.fullmatch(key.strip()):
            raise ValueError(f"{path}: not KEY=VALUE: {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].rstrip()
        env[key.strip()] = value
    return env


def load_compose(env: dict[str, str], path: Path = ROOT / "docker-compose.yml") -> dict[str, Any]:
    """The compose file parsed and interpolated with ``env`` (raises
    :class:`InterpolationError`)."""
    return interpolate_tree(yaml.safe_load(path.read_text()), env)


def dockerfile_image(path: Path = ROOT / "Dockerfile") -> Image:
    """The working dir (last ``WORKDIR``), ``ENV`` and ``CMD`` of our Dockerfile's image."""
    text = re.sub(r"\\\n", " ", path.read_text())
    image_env: dict[str, str] = {}
    workdir, cmd = "/", None
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "WORKDIR":
            workdir = rest.strip()
        elif word == "ENV":
            for item in shlex.split(rest, comments=True):
                key, sep, value = item.partition("=")
                assert sep, f"Dockerfile ENV in the old 'KEY value' form: {line!r}"
                image_env[key] = value
        elif word == "CMD":
            cmd = yaml.safe_load(rest)
    return Image(workdir=workdir, env=image_env, cmd=cmd)


@dataclass
class LocalService:
    """One service as a local process: argv, environment (the service's own, not the parent's),
    working dir, and every rewrite made, as ``{where: (compose value, local value)}`` with
    ``where`` = ``"argv"``, ``"cwd"`` or ``"env:NAME"`` (compose value None: added)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    rewrites: dict[str, tuple[str | None, str]] = field(default_factory=dict)


def _container_path(value: str, mounts: dict[str, Path], own_root: Path) -> str:
    for target in sorted(mounts, key=len, reverse=True):
        if value == target or value.startswith(target.rstrip("/") + "/"):
            return str(mounts[target]) + value[len(target) :]
    return str(own_root) + value


def _mounts(svc: dict[str, Any], volumes_dir: Path) -> dict[str, Path]:
    """Mount point -> local directory or file: named volumes under ``volumes_dir``, bind mounts
    at their host path (relative to the compose file)."""
    mounts: dict[str, Path] = {}
    for spec in svc.get("volumes", []):
        source, target = spec.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (ROOT / source).resolve()
        else:
            mounts[target] = volumes_dir / source
            mounts[target].mkdir(parents=True, exist_ok=True)
    return mounts


def localize(
    name: str, compose: dict[str, Any], redis_port: int, published: dict[int, int], scratch: Path
) -> LocalService:
    """Service ``name`` of an interpolated compose file, as a local process.

    Parameters
    ----------
    name : str
        A key of ``compose["services"]``.
    compose : dict
        :func:`load_compose` output.
    redis_port : int
        Loopback port of the local Redis: ``redis:6379`` in URLs becomes ``127.0.0.1:<port>``.
    published : dict
        Container port -> the free loopback port it is published on locally.
    scratch : Path
        Directory for named volumes (``volumes/<name>``) and the services' own filesystems
        (``<service>-root``).

    Returns
    -------
    LocalService
        argv, environment and working dir for the local process, and the rewrites made.

    Raises
    ------
    AssertionError
        If the service publishes a port beyond 127.0.0.1, or one this function cannot move.
    """
    svc = compose["services"][name]
    image = PUBLIC_IMAGES.get(svc["image"]) or dockerfile_image()
    argv = list(svc.get("command") or image.cmd or [])
    env = {**image.env, **svc.get("environment", {})}
    own_root = scratch / f"{name}-root"
    mounts = _mounts(svc, scratch / "volumes")
    local = LocalService(
        name, list(argv), {}, Path(_container_path(image.workdir, mounts, own_root))
    )
    local.rewrites["cwd"] = (image.workdir, str(local.cwd))

    def rewrite(value: str) -> str:
        value = re.sub(r"(?<=[@/])redis:6379\b", f"{LOOPBACK}:{redis_port}", value)
        if value.startswith("/"):
            return _container_path(value, mounts, own_root)
        opt, eq, path = value.partition("=")
        if opt.startswith("--") and eq and path.startswith("/"):
            return f"{opt}={_container_path(path, mounts, own_root)}"
        return value

    local.argv = [rewrite(a) for a in argv]
    for key, value in env.items():
        local.env[key] = rewrite(str(value))
        if local.env[key] != str(value):
            local.rewrites[f"env:{key}"] = (str(value), local.env[key])
    _publish(local, svc, published)
    if local.argv != argv:
        local.rewrites["argv"] = (shlex.join(argv), shlex.join(local.argv))
    for path in [
        local.cwd,
        *(Path(v).parent for v in local.env.values() if v.startswith(str(scratch))),
    ]:
        path.mkdir(parents=True, exist_ok=True)
    return local


def _publish(local: LocalService, svc: dict[str, Any], published: dict[int, int]) -> None:
    """Make the server listen where its ``ports`` entry publishes it: on 127.0.0.1 (every entry
    must say so) and on the local port standing for the container port."""
    for spec in svc.get("ports", []):
        host_ip, _host_port, container_port = str(spec).split(":")
        assert host_ip == LOOPBACK, f"{local.name} publishes {spec} beyond loopback"
        port = str(published[int(container_port)])
        if local.argv and local.argv[0] == "redis-server":
            local.argv += ["--bind", LOOPBACK, "--port", port]
        elif local.env.get("FLOWER_PORT") == container_port:
            local.env["FLOWER_PORT"] = port
            local.env["FLOWER_ADDRESS"] = LOOPBACK
            local.rewrites["env:FLOWER_PORT"] = (container_port, port)
            local.rewrites["env:FLOWER_ADDRESS"] = (None, LOOPBACK)
        else:
            raise AssertionError(f"{local.name}: do not know how to publish {spec}")
