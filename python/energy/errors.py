"""The exceptions of the energy package.

Every error the package raises is an ``energy.Error``: ``CompileError`` for a
model that does not compile (with its place in the source), ``ShapeError``
for a tensor whose shape does not fit its declaration, ``RuntimeError`` for
everything the runtime refuses (an unknown tensor or dim, a failed run).
"""

import builtins


class Error(Exception):
    """Base class of the package's errors."""


class CompileError(Error):
    """A model that does not compile.

    ``file``, ``line`` and ``column`` locate the first error (line and column
    0 where it has no place), ``message`` is its text; ``str(error)`` is every
    diagnostic as energyc prints them, with the source line and a caret.
    """

    def __init__(self, message, file="", line=0, column=0, printed=""):
        super().__init__(printed or message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column

    def __str__(self):
        return self.args[0]


class ShapeError(Error, ValueError):
    """A tensor whose shape does not fit its declaration (the message names
    the tensor, its declared shape and the given one)."""


class RuntimeError(Error, builtins.RuntimeError):
    """What the runtime refuses: an unknown tensor or dim, a failed step."""
