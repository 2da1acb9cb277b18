"""The shapes and dtypes of a call's array-like arguments, as a key (cheap) and as text (once).

An argument is array-like when its type has both `shape` and `dtype` (torch, NumPy, CuPy, JAX
arrays): asked of the type, once per type, so an object whose `__getattr__` answers anything
is not taken for one. Arguments are looked at directly, and one level inside a list or tuple
(`np.concatenate([a, b])`); other arguments are left out of the key and the text.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from autonvtx.config import RangeStyle
    from autonvtx.ranges import Emitter

# Per type: what its instances are (0: not array-like, 1: array-like, 2: a NumPy array whose
# `shape` and `dtype` are ndarray's own, which the native wrapper reads from its struct). Types
# are few; the dict stays small.
_ARRAY_TYPES: dict[type, int] = {}
NOT_ARRAY, ARRAY_LIKE, NUMPY_LAYOUT = 0, 1, 2


def _is_array_type(cls: type) -> int:
    found = _ARRAY_TYPES.get(cls)
    if found is None:
        found = _ARRAY_TYPES[cls] = _array_kind(cls)
    return found


def _array_kind(cls: type) -> int:
    if not (hasattr(cls, "shape") and hasattr(cls, "dtype")):
        return NOT_ARRAY
    ndarray = next((base for base in cls.__mro__ if base.__module__ == "numpy" and base.__name__ == "ndarray"), None)
    if ndarray is not None and cls.shape is ndarray.shape and cls.dtype is ndarray.dtype:  # type: ignore[attr-defined]
        return NUMPY_LAYOUT
    return ARRAY_LIKE


def shapes_key(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> tuple[Any, ...]:
    """A hashable key of the shapes and dtypes of the array-like arguments, in order: a
    (shape, dtype) pair each; () when there are none. Raises what an odd array raises (a
    shape that is not a sequence): callers range the call without shapes then."""
    return key_function()(args, kwargs)


def key_function() -> Callable[[tuple[Any, ...], dict[str, Any] | None], tuple[Any, ...]]:
    """shapes_key itself, in C where the native client is built (_native/shapes.c: no Python
    frame; the torch plugin keys each module call by it), else in Python."""
    global _KEY_FUNCTION
    if _KEY_FUNCTION is None:
        from autonvtx import ranges

        client = ranges.native_client()
        if client is not None and hasattr(client, "set_array_kinds"):
            client.set_array_kinds(_ARRAY_TYPES, _is_array_type)
            _KEY_FUNCTION = client.shapes_key
        else:
            _KEY_FUNCTION = _python_shapes_key
    return _KEY_FUNCTION


_KEY_FUNCTION: Callable[[tuple[Any, ...], dict[str, Any] | None], tuple[Any, ...]] | None = None


def _python_shapes_key(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> tuple[Any, ...]:
    key: list[Any] = []
    for value in args:
        _add(key, value, 1)
    if kwargs:
        for value in kwargs.values():
            _add(key, value, 1)
    return tuple(key)


def _add(key: list[Any], value: Any, depth: int) -> None:
    cls = type(value)
    if cls in (int, float, str, bool) or value is None:
        return
    if _is_array_type(cls):
        key.append((tuple(value.shape), value.dtype))
    elif depth and (cls is list or cls is tuple):
        for item in value:
            _add(key, item, depth - 1)


def describe(key: tuple[Any, ...]) -> str:
    """`key` as text: ``32x128 float64, 128x64 float64`` (a 0-d array: ``scalar float32``)."""
    parts = []
    for shape, dtype in key:
        dims = "x".join(str(int(d)) for d in shape) if shape else "scalar"
        parts.append(f"{dims} {_dtype_name(dtype)}")
    return ", ".join(parts)


def suffix(key: tuple[Any, ...]) -> str:
    """What a range's message gets for `key`: `` [32x128 float64]``, or "" for no arrays."""
    return f" [{describe(key)}]" if key else ""


def _dtype_name(dtype: Any) -> str:
    name = str(dtype)
    # torch spells its dtypes "torch.float32"; NumPy, CuPy and JAX "float32".
    return name[6:] if name.startswith("torch.") else name


def wrapper(style: RangeStyle, message: str) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """The wrapt wrapper of a rule with `shapes = true`: a range named `message` followed by
    the shapes and dtypes of the call's array-like arguments (`mm [32x128 float64, 128x64
    float64]`), its emitter made once per distinct key and found by a dict look-up after. One
    Python frame per call: the key is built inline (its cost is per call)."""
    from autonvtx import ranges  # loaded with the engine already

    plain = ranges.emitter_with_message(style, message)
    client = ranges.native_client()
    named = _Named(style, message)
    if plain.native is not None and client is not None and hasattr(client, "ShapedRanges"):
        # The same, in C (_native/shapes.c): the key built without a Python frame.
        def make(key: tuple[Any, ...]) -> Any:
            return named.emitter(key).native

        return client.ShapedRanges(plain.native, make, _ARRAY_TYPES, _is_array_type)  # type: ignore[no-any-return]
    made: dict[Any, Emitter] = {(): plain}
    array_types = _ARRAY_TYPES

    def call(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        key: Any = []
        try:
            for value in args:
                cls = type(value)
                is_array = array_types.get(cls)
                if is_array is None:
                    is_array = _is_array_type(cls)
                if is_array:
                    key.append((value.shape, value.dtype))  # hashed as it is: a tuple, torch.Size
                elif cls is list or cls is tuple:
                    _add(key, value, 1)
            if kwargs:
                for value in kwargs.values():
                    _add(key, value, 1)
            key = tuple(key)
            emitter = made.get(key)
            if emitter is None:
                emitter = named.emitter(key)
                if not named.full:
                    made[key] = emitter
        except Exception:  # an odd array-like (an unhashable dtype): the range without shapes
            emitter = plain
        native = emitter.native
        if native is not None:  # the native Range's call: --budget measures it, as any range
            return native(wrapped, instance, args, kwargs)
        emitter.push()
        try:
            return wrapped(*args, **kwargs)
        finally:
            emitter.pop()

    return call


# Names made per function at most: a function called with ever new shapes (a growing sequence
# length) would otherwise register a name, and keep a range and its key, for each. Past it, new
# shapes share one range, `name [other shapes]`, and one warning says so.
SHAPES_PER_FUNCTION = 10_000


class _Named:
    """The ranges of one function's shapes: one per key, up to SHAPES_PER_FUNCTION."""

    def __init__(self, style: RangeStyle, message: str) -> None:
        self._style, self._message, self._made = style, message, 0
        self._other: Emitter | None = None

    @property
    def full(self) -> bool:
        return self._made >= SHAPES_PER_FUNCTION

    def emitter(self, key: tuple[Any, ...]) -> Emitter:
        from autonvtx import ranges

        if not self.full:
            self._made += 1
            return ranges.emitter_with_message(self._style, self._message + suffix(key))
        if self._other is None:
            import sys

            print(
                f"autonvtx: warning: {self._message} was called with more than {SHAPES_PER_FUNCTION:,} different "
                f"shapes: further new shapes share the range '{self._message} [other shapes]'",
                file=sys.stderr,
            )
            self._other = ranges.emitter_with_message(self._style, f"{self._message} [other shapes]")
        return self._other


def is_native(wrapper: Any) -> bool:
    """Whether `wrapper` (from wrapper()) is the native ShapedRanges, which a ranged function
    wrapper (ranged.c) calls directly."""
    return type(wrapper).__name__ == "ShapedRanges" and type(wrapper).__module__ == "autonvtx._nvtxclient"
