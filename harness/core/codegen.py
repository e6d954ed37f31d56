"""Python source generated for one grammar: the form every compiled pass takes.

The core compiles its hot passes to Python specialised to a grammar (the random
and bytes walks, :mod:`harness.core.walk`; the encoder and layout builder,
:mod:`harness.core.codec`; the node lister, :mod:`harness.core.tree`; the render
pass, :mod:`harness.core.render_code`).  Each is built by a function
``*_module(grammar, ...) -> Module``: the source, as a reader can print it
(``print(module.source)``), and the constants it names; :meth:`Module.load`
executes it.  Nothing else is run to make a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Module:
    """Generated source (``lines``) and the values its free names are bound to."""

    #: the file name its code objects and tracebacks show, e.g. ``<random walk of g.py>``
    name: str
    lines: list[str] = field(default_factory=list)
    constants: dict[str, object] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return "\n".join(self.lines)

    def load(self) -> dict:
        """The module's namespace after running it (its constants and what it defines)."""
        namespace = dict(self.constants)
        exec(compile(self.source, self.name, "exec"), namespace)
        return namespace
