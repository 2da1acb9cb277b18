/*
 * autonvtx._nvtxclient: autonvtx's own NVTX client, a CPython extension module.
 *
 * It compiles the NVTX v3 headers with their implementation, so it is one more NVTX client
 * in the process: on its first NVTX call it loads the tool $NVTX_INJECTION64_PATH names
 * (Nsight Systems, autonvtx's recorder) or, with none, turns every entry point into a no-op.
 * Only autonvtx/ranges.py imports it; a pure-Python path in ranges.py produces the same
 * events when it is missing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <nvtx3/nvToolsExt.h>

#include <stdint.h>

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

static PyMethodDef module_methods[] = {
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
    return PyModule_Create(&module_def);
}
