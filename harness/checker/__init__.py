"""Precondition checker: the independent oracle for loom-fuzz programs.

It reads program *text* in the canonical rendering of
``shared/spec/program-shape.md`` (custom ``dataflow.thread`` syntax, generic
``"loom.spatial_region"`` ops) and reports every violated precondition
P1-P24 with its line and column.  With ``conventions=True`` it also reports
the sampling conventions of the default profile that one program can show
(C1-C8 with C9-C13's fixed bodies, C14, C19, C20, C22; C15-C18, C21 and C23
are implied by preconditions, the rest are about distributions).

Why it is built like this:

* It never imports the renderer, the engines or the grammars.  It is written
  from the spec alone, so a bug in the generator cannot hide itself here.
* It is a small line-oriented structural parser, not a comparison against the
  known texts: lines are grouped into a tree by their braces (one operation
  per line, a trailing ``{`` opens a block, a leading ``}`` closes it) and each
  precondition group is a small function over that tree.  That gives precise
  diagnostics (line, column, precondition) for programs that are almost right.
* It never raises on any text: whatever it cannot parse is reported against
  the most relevant precondition.

The modules, from the bottom up (none imports one above it):

* ``violation`` - the reported record; ``text`` - lines, tokens, the cursor;
  ``tree`` - the brace tree and template matching; ``records`` - what the
  walk remembers; ``state`` - the walk's state and shared judgements.
* ``region_ops`` (leaf operations), ``region_body`` (a region's block
  structure), ``regions`` (a region's header and closing line, unique names),
  ``threads`` (thread bodies and wrappers), ``module_shell`` (the module and
  its fixed functions): each layer extends the one below.
* ``conventions`` - the default profile's conventions; ``check`` - the
  assembled walk and the entry points.
"""

from .check import check_file, check_text
from .violation import PRECONDITION_COUNT, Violation

__all__ = ["PRECONDITION_COUNT", "Violation", "check_file", "check_text"]
