"""Kept so ``jev_shared.wire.Surface`` stays importable as the docs once named it: the wires live in
:mod:`jev_shared.surfaces` (``jev_shared.surfaces.Surface``)."""

from .surfaces.wire import Builder, Parsed, Parser, Surface

__all__ = ["Builder", "Parsed", "Parser", "Surface"]
