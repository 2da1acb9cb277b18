"""Numba CUDA plugin: a range around each kernel launch, named by the kernel, and around the
host-side calls that move data or wait for the device.

What gets a range (category "kernel launch" or "cuda"):

- each launch of a `@cuda.jit` kernel (`kernel[grid, block](...)`, `kernel.forall(n)(...)`),
  named by the kernel's qualified name: ``convolve``; with the option `launch_config = true`,
  by name and launch configuration as written in the source: ``convolve[(7, 7), (32, 32)]``
  (one range name per configuration seen);
- ``cuda.to_device``, ``copy_to_host`` (device arrays' `copy_to_host`),
  ``cuda.synchronize`` and ``Stream.synchronize``.

What a launch range measures is the host side of the launch, and that depends on the
arguments (GPU work is asynchronous). With device arrays it is argument marshalling
and the launch call: the kernel itself runs after the range ends, and shows up on the GPU row
of Nsight Systems and under the next synchronizing call's range. With NumPy arrays Numba
copies them to the device before the launch and back after it, and the copy back waits for
the kernel, so the range covers transfers and execution. The first launch of a kernel for a
new signature also compiles it. Device functions get no range (they are not launched).

Under the CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`) the same ranges are emitted, and since
the simulator runs the kernel in Python inside the launch call, a launch range covers the
whole simulated execution: useful to test a program's profile on a machine without a GPU.

Options (`[autonvtx.plugin.numba]`): `launch_config` (default false), `transfers` (default
true: the to_device/copy_to_host/synchronize ranges), `domain` (default: the global domain).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.engines.wrap import EmitterChooser
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "numba.cuda"

OPTIONS: dict[str, type] = {"launch_config": bool, "transfers": bool, "domain": str}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    cuda = framework
    options = context.read_options(OPTIONS)
    domain = options.get("domain")
    launches = LaunchNamer(
        context,
        context.style(domain=domain, category="kernel launch", module="numba.cuda"),
        bool(options.get("launch_config", False)),
    )
    simulated = _is_simulator(cuda)
    if simulated:
        _patch_simulated_launch(launches, context)
    else:
        _patch_launch(launches, context)
    if options.get("transfers", True):
        _patch_transfers(cuda, simulated, context, domain)


def plan(framework: types.ModuleType, context: PluginContext) -> list[tuple[str, str, str]]:
    """What activate() would range, for `autonvtx list`."""
    options = context.read_options(OPTIONS)
    naming = "'kernel[grid, block]'" if options.get("launch_config", False) else "'kernel'"
    if _is_simulator(framework):
        entries = [
            ("numba.cuda.simulator.kernel", "FakeCUDAKernel.__call__", f"each simulated kernel launch, named {naming}")
        ]
        array, stream = "numba.cuda.simulator.cudadrv.devicearray.FakeCUDAArray", "numba.cuda.simulator.api.stream"
    else:
        entries = [("numba.cuda.dispatcher", "CUDADispatcher.call", f"each kernel launch, named {naming}")]
        array, stream = "numba.cuda.cudadrv.devicearray.DeviceNDArrayBase", "numba.cuda.cudadrv.driver.Stream"
    if options.get("transfers", True):
        entries.append(("numba.cuda", "to_device", "'cuda.to_device'"))
        entries.append(("numba.cuda", "synchronize", "'cuda.synchronize'"))
        for path, attr, name in (
            (array, "copy_to_host", "'copy_to_host'"),
            (stream, "synchronize", "'Stream.synchronize'"),
        ):
            module, _, cls = path.rpartition(".")
            entries.append((module, f"{cls}.{attr}", name))
    return entries


def _is_simulator(cuda: types.ModuleType) -> bool:
    # numba.cuda imports simulator_init instead of device_init when this is set (read once,
    # at numba's import, from NUMBA_ENABLE_CUDASIM).
    config = sys.modules.get("numba.core.config")
    return bool(getattr(config, "ENABLE_CUDASIM", False))


class LaunchNamer:
    """The emitter of a launch: one per kernel (and launch configuration, if asked for)."""

    def __init__(self, context: PluginContext, style: RangeStyle, launch_config: bool) -> None:
        self._context = context
        self._style = style
        self._launch_config = launch_config
        self._by_kernel: dict[Any, Emitter] = {}

    def emitter(self, py_func: Any, griddim: Any, blockdim: Any) -> Emitter:
        key = (py_func, griddim, blockdim) if self._launch_config else py_func
        try:
            found = self._by_kernel.get(key)
        except TypeError:  # unhashable dimensions: name by kernel only
            key, found = py_func, self._by_kernel.get(py_func)
        if found is None:
            name = str(getattr(py_func, "__qualname__", None) or getattr(py_func, "__name__", "kernel"))
            if self._launch_config and key is not py_func:
                name = f"{name}[{_dims(griddim)}, {_dims(blockdim)}]"
            found = self._by_kernel[key] = self._context.emitter(name, self._style)
        return found


def _dims(dims: Any) -> str:
    """(7, 7, 1) as "(7, 7)", (256, 1, 1) as "256": the launch as the source spells it."""
    try:
        values = [int(d) for d in dims]
    except TypeError:
        return str(dims)
    while len(values) > 1 and values[-1] == 1:
        values.pop()
    return str(values[0]) if len(values) == 1 else str(tuple(values))


def _patch_launch(launches: LaunchNamer, context: PluginContext) -> None:
    # Every launch of a real kernel goes through CUDADispatcher.call(self, args, griddim,
    # blockdim, stream, sharedmem): kernel[grid, block](...) builds a _LaunchConfiguration
    # whose __call__ calls it; forall does the same.
    emitter = launches.emitter

    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter:
        griddim = _argument(args, kwargs, 2, "griddim")
        blockdim = _argument(args, kwargs, 3, "blockdim")
        return emitter(args[0].py_func, griddim, blockdim)

    _wrap_launch_method("numba.cuda.dispatcher", "CUDADispatcher", "call", emitter_for, context, "")


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs[name]


def _patch_simulated_launch(launches: LaunchNamer, context: PluginContext) -> None:
    emitter = launches.emitter

    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter | None:
        kernel = args[0]  # FakeCUDAKernel.__call__(self, *args)
        if kernel._device:  # a device function called from a simulated kernel: not a launch
            return None
        return emitter(kernel.fn, kernel.grid_dim, kernel.block_dim)

    _wrap_launch_method(
        "numba.cuda.simulator.kernel",
        "FakeCUDAKernel",
        "__call__",
        emitter_for,
        context,
        " (simulator)",
    )


def _wrap_launch_method(
    module: str,
    class_name: str,
    attr: str,
    emitter_for: EmitterChooser,
    context: PluginContext,
    flavour: str,
) -> None:
    """Range `module.class_name.attr`, the function every kernel launch goes through. Imported
    here: numba.cuda imports it already, and the import fails cleanly without CUDA bits."""
    try:
        owner = getattr(importlib.import_module(module), class_name)
    except (ImportError, AttributeError) as exc:
        context.note(f"{module}.{class_name} not importable ({exc}): no launch ranges")
        return
    if context.wrap_method(owner, attr, emitter_for):  # or notes why not
        context.note(f"CUDA kernel launches{flavour}: a range per launch, named by kernel")


def _patch_transfers(cuda: types.ModuleType, simulated: bool, context: PluginContext, domain: str | None) -> None:
    style = context.style(domain=domain, category="cuda", module="numba.cuda")
    wrapped: list[str] = []

    def wrap(owner: Any, attr: str, message: str) -> None:
        if owner is not None and context.wrap_function(owner, attr, message, style):
            wrapped.append(message)

    # What programs call: the package's own attributes (`cuda.to_device(...)`).
    wrap(cuda, "to_device", "cuda.to_device")
    wrap(cuda, "synchronize", "cuda.synchronize")
    if simulated:
        wrap(_attribute("numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray"), "copy_to_host", "copy_to_host")
        wrap(_attribute("numba.cuda.simulator.api", "stream"), "synchronize", "Stream.synchronize")
    else:
        wrap(_attribute("numba.cuda.cudadrv.devicearray", "DeviceNDArrayBase"), "copy_to_host", "copy_to_host")
        wrap(_attribute("numba.cuda.cudadrv.driver", "Stream"), "synchronize", "Stream.synchronize")
    if wrapped:
        context.note(f"transfers and waits: {', '.join(wrapped)}")


def _attribute(module: str, name: str) -> Any:
    return getattr(sys.modules.get(module), name, None)
