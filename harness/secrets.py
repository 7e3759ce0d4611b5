"""Credentials in a tracking URI (``http://USER:PASSWORD@HOST:PORT``) never reach a file or a log.

MLflow sends HTTP basic auth from the environment variables ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD``; a URI's userinfo is moved there, for this process and the
processes it starts, and taken out of the URI before anything prints or saves it. On the
command line this must happen before ``hydra.main`` sees ``sys.argv``: Hydra writes the
overrides and the composed config to ``.hydra/*.yaml`` before the task function runs.

Kept free of MLflow, Hydra and torch imports (it runs before them).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import MutableMapping, Sequence

USERNAME, PASSWORD = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
_URI_KEYS = ("tracking.uri", "+tracking.uri", "++tracking.uri")
# scheme://userinfo@ : what mask() hides, in any text
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s'\"]*)@")


class CredentialsError(ValueError):
    """A URI's userinfo cannot be sent as MLflow sends credentials (its message is masked)."""


def mask(text: str) -> str:
    """``text`` with the userinfo of every URI in it replaced by ``***``
    (``http://user:secret@host`` → ``http://***@host``)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)


def split_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """``(uri without userinfo, user, password)``, user and password percent-decoded (RFC 3986
    userinfo); ``(uri, None, None)`` for a URI without userinfo."""
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, None, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, sep, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return clean, urllib.parse.unquote(user), urllib.parse.unquote(password) if sep else None


def move_credentials(uri: str, environ: MutableMapping[str, str] = os.environ) -> str:
    """``uri`` without userinfo; its user and password set as ``MLFLOW_TRACKING_USERNAME`` and
    ``MLFLOW_TRACKING_PASSWORD`` in ``environ`` (replacing values there: the URI is the later,
    explicit choice).

    Raises:
        CredentialsError: for userinfo without a password (``http://token@host``), masked, with
            the environment variables to use instead.
    """
    clean, user, password = split_credentials(uri)
    if user is None:
        return uri
    if password is None or not user:
        raise CredentialsError(
            f"tracking.uri={mask(uri)} has a user name or token but not USER:PASSWORD; give the "
            f"credentials in the environment instead: {USERNAME} and {PASSWORD} (basic auth) or "
            "MLFLOW_TRACKING_TOKEN (bearer token), and tracking.uri without them")
    environ[USERNAME], environ[PASSWORD] = user, password
    return clean


PG_USER, PG_PASSWORD = "PGUSER", "PGPASSWORD"  # what libpq (psycopg) reads when the URI has none


def database_credentials(uri: str, environ: MutableMapping[str, str] = os.environ) -> str:
    """A PostgreSQL URI (``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB``) without userinfo;
    its user and password set as ``PGUSER`` and ``PGPASSWORD`` in ``environ``, which libpq reads
    (for the driver, its heartbeat and its MLflow client alike). A user without a password is
    allowed (trust or ``~/.pgpass`` authentication).

    Raises:
        CredentialsError: as :func:`move_credentials`.
    """
    clean, user, password = split_credentials(uri)
    if user is not None:
        if not user:
            raise CredentialsError(f"tracking.uri={mask(uri)} has a password but no user name")
        environ[PG_USER] = user
        if password is not None:
            environ[PG_PASSWORD] = password
        return clean
    return uri


def scrub_argv(argv: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """``argv`` with the userinfo of a ``tracking.uri=`` override moved to ``environ``
    (:func:`move_credentials`; for a PostgreSQL URI :func:`database_credentials`); other
    arguments unchanged.

    Raises:
        CredentialsError: as :func:`move_credentials`.
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in _URI_KEYS:
            quote = value[0] if len(value) > 1 and value[0] in "'\"" and value[-1] == value[0] else ""
            inner = value[1:-1] if quote else value
            move = database_credentials if inner.startswith(("postgresql://", "postgresql+")) else move_credentials
            arg = f"{key}={quote}{move(inner, environ)}{quote}"
        out.append(arg)
    return out


def scrub_command_line() -> None:
    """:func:`scrub_argv` on ``sys.argv`` in place, for every entry point (``python -m harness``,
    ``python -m analysis``, ``python -m analysis.report``) before ``hydra.main`` sees it; a user
    name or token without a password ends the process with exit status 2 and one masked line."""
    import sys

    try:
        sys.argv = scrub_argv(sys.argv)
    except CredentialsError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
