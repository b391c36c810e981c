"""Kept so ``jev_shared.engine`` stays importable: the clients live in :mod:`jev_shared.client`."""

from .client import AsyncSystemOneClient, SystemOneClient

__all__ = ["SystemOneClient", "AsyncSystemOneClient"]
