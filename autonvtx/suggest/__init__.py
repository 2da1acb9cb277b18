"""`autonvtx suggest`: rules written from one measured run of the program.

`measure` runs the program once under broad rules (in a child process, through the same runner
as `autonvtx run`, recorded or under Nsight Systems) and reads what it measured into a `calls`
tree; `choice` decides which functions deserve a range; `rulesfile` writes them as a config a
person can read and edit.
"""

from __future__ import annotations
