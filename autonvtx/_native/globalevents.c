/*
 * Where the interpreter keeps which tools each global sys.monitoring event calls: the
 * `monitors` table of PyInterpreterState, an internal structure (Include/internal/
 * pycore_interp.h). The code engine turns its own PY_UNWIND bit there on and off as its first
 * range opens and its last closes (monitoring.c): PEP 669 gives PY_UNWIND no local form, and
 * sys.monitoring.set_events re-instruments every running frame each time it is called.
 *
 * This unit alone is compiled as part of the core (Py_BUILD_CORE), for offsetof() only: it
 * calls nothing internal. ranges.py checks the table behaves as the offset says, through the
 * public set_events, before relying on it; anywhere else PY_UNWIND stays on for good.
 */
#include <patchlevel.h>
#include <pyconfig.h> /* Py_GIL_DISABLED */

/* Some distributions ship Python's headers without the internal ones: PY_UNWIND then stays on. */
#if defined(__has_include)
#if !__has_include(<internal/pycore_interp.h>)
#define AUTONVTX_NO_INTERNAL_HEADERS 1
#endif
#endif

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    !defined(AUTONVTX_NO_INTERNAL_HEADERS)
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_interp.h>
#include <stddef.h>

_Static_assert(PY_MONITORING_EVENT_PY_UNWIND == 12 && PY_MONITORING_EVENT_PY_THROW == 13,
               "monitoring.c's EVENT_PY_UNWIND and EVENT_PY_THROW");

Py_ssize_t global_events_offset(void)
{
    return (Py_ssize_t)offsetof(PyInterpreterState, monitors);
}

#else

#include <Python.h>

Py_ssize_t global_events_offset(void)
{
    return -1;
}

#endif
