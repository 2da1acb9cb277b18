"""autonvtx: NVTX ranges on any Python program's own functions, without touching its source.

Importing the package is cheap on purpose: `autonvtx run` installs its import hook before
anything heavy (nvtx imports numpy) is loaded, so the public API below is loaded on first use.

    import autonvtx
    with autonvtx.install(targets=["mypkg.*"]):
        train()

In IPython or Jupyter: `%load_ext autonvtx`, then `%autonvtx -t 'mypkg.*' --preset torch`.
"""

from __future__ import annotations

from autonvtx.errors import AutonvtxError, ConfigError, UsageError

# Annotations only: `autonvtx run` imports this package first, and typing costs start-up (issue 24).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

__all__ = [
    "AutonvtxError",
    "ConfigError",
    "Installation",
    "UsageError",
    "__version__",
    "install",
    "is_instrumented",
    "load_ipython_extension",
    "unload_ipython_extension",
]

_API = ("install", "Installation", "is_instrumented", "load_ipython_extension", "unload_ipython_extension")


def __getattr__(name: str) -> Any:
    # PEP 562: the API (and what it imports) loads when first asked for, not with the package.
    if name in _API:
        from autonvtx import api

        return getattr(api, name)
    raise AttributeError(f"module 'autonvtx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
