"""Types of the native twin of runner.compile_script (autonvtx/_native/sourcecode.c)."""

from types import CodeType

def compile_exec(source: str | bytes, filename: str, /) -> CodeType: ...
