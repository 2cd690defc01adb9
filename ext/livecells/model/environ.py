"""What of the build's environment reaches the kernels: every variable but those whose names match
``livecells_env_drop`` (by default, the names secrets go by in CI: tokens, passwords, keys), so
that a cell cannot read or print the build's credentials. Nothing here knows Sphinx."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

#: Name patterns (shell-style, any case) of variables kept from kernels unless configured.
DEFAULT_ENV_DROP = (
    "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*PASSPHRASE*", "*CREDENTIAL*", "*_KEY",
    "*_KEY_ID", "*API_KEY*", "*APIKEY*", "*PRIVATE_KEY*", "*_PAT", "*JWT*", "*_AUTH",
    "*AUTH_CONFIG*", "*_DSN", "SSH_AUTH_SOCK",
)  # fmt: skip


def kept_environ(environ: Mapping[str, str], drop: Iterable[str]) -> dict[str, str]:
    """``environ`` without the variables whose names match a pattern of ``drop`` (any case)."""
    patterns = [pattern.upper() for pattern in drop]
    return {
        name: value
        for name, value in environ.items()
        if not any(fnmatchcase(name.upper(), pattern) for pattern in patterns)
    }
