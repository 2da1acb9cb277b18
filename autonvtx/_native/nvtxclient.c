/*
 * autonvtx._nvtxclient: autonvtx's own NVTX client, a CPython extension module.
 *
 * It compiles the NVTX v3 headers with their implementation, so it is one more NVTX client
 * in the process: on its first NVTX call it loads the tool $NVTX_INJECTION64_PATH names
 * (Nsight Systems, autonvtx's recorder) or, with none, turns every entry point into a no-op.
 * Only autonvtx/ranges.py imports it; a pure-Python path in ranges.py produces the same
 * events when it is missing.
 *
 * Its parts are listed in nvtxclient.h: Range (range.c), the wrapper engine's ranged function
 * type (ranged.c) and generator drivers (steps.c), and the code engine's sys.monitoring
 * callbacks (monitoring.c, Python 3.12+).
 */
#include "nvtxclient.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

PyDoc_STRVAR(end_by_sigint_doc,
"end_by_sigint_after_finalizing()\n--\n\n"
"After an uncaught KeyboardInterrupt: once the interpreter has finalized (the program's files\n"
"flushed, every exit handler run), end the process by SIGINT, as CPython's own main does\n"
"(Modules/main.c, exit_sigint), so a parent sees it killed by SIGINT. False when Py_AtExit\n"
"refused the hook (the exit status, 130, stays).");

static void sigint_after_finalizing(void)
{
    signal(SIGINT, SIG_DFL);
    kill(getpid(), SIGINT);
}

static PyObject* end_by_sigint_after_finalizing(PyObject* module, PyObject* unused)
{
    static int registered;
    (void)module;
    (void)unused;
    if (!registered && Py_AtExit(sigint_after_finalizing) == 0)
        registered = 1;
    return PyBool_FromLong(registered);
}

PyDoc_STRVAR(name_os_thread_doc,
"name_os_thread(tid, name, /)\n--\n\n"
"Name the OS thread `tid` (a native thread id, threading.get_native_id()) for NVTX tools\n"
"(nvtxNameOsThreadA).");

static PyObject* name_os_thread(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    unsigned long tid;
    const char* name;
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "name_os_thread expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    tid = PyLong_AsUnsignedLong(args[0]);
    if (tid == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (tid > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "name_os_thread: tid does not fit in 32 bits");
        return NULL;
    }
    if (!PyUnicode_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "name_os_thread: name must be str, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL)
        return NULL;
    nvtxNameOsThreadA((uint32_t)tid, name);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(push_pop_loop_doc,
"push_pop_loop(range, n, /)\n--\n\n"
"Push and pop `range` n times in C with the GIL released: what the attached tool costs per\n"
"event without the interpreter's share (benchmarks).");

static PyObject* push_pop_loop(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    RangeObject* r;
    Py_ssize_t n, i;
    (void)module;
    if (nargs != 2 || !Py_IS_TYPE(args[0], &RangeType)) {
        PyErr_SetString(PyExc_TypeError, "push_pop_loop(range: Range, n: int)");
        return NULL;
    }
    r = (RangeObject*)args[0];
    if (r->domain_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "Range is not initialized");
        return NULL;
    }
    n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; ++i) {
        range_push(r);
        range_pop(r);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"end_by_sigint_after_finalizing", end_by_sigint_after_finalizing, METH_NOARGS, end_by_sigint_doc},
    {"push_pop_loop", (PyCFunction)(void (*)(void))push_pop_loop, METH_FASTCALL, push_pop_loop_doc},
    {"name_os_thread", (PyCFunction)(void (*)(void))name_os_thread, METH_FASTCALL, name_os_thread_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "autonvtx._nvtxclient",
    "autonvtx's NVTX client: thread naming and the native per-call range path.",
    -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__nvtxclient(void)
{
    PyObject* module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (range_add_to_module(module) < 0 || ranged_add_to_module(module) < 0 ||
        steps_add_to_module(module) < 0 || monitoring_add_to_module(module) < 0 ||
        regions_add_to_module(module) < 0 || uniform_add_to_module(module) < 0 ||
        modulepath_add_to_module(module) < 0 || chainedloader_add_to_module(module) < 0 ||
        chainedfinder_add_to_module(module) < 0 || deadline_add_to_module(module) < 0 ||
        flightwatch_add_to_module(module) < 0 ||
        shapes_add_to_module(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
