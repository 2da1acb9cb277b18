/*
 * autonvtx._sourcecode: compile the target's source as `python SCRIPT` compiles it.
 *
 * builtins.compile() asks PyAST_Check() whether its argument is an AST object, and that first
 * question builds every type of the `ast` module (Python/Python-ast.c, init_types): about 9M
 * instructions on 3.11 and 3.12, 11M on 3.13, a third of what `autonvtx run` adds to a plain
 * start-up (issue 24). `python SCRIPT` never asks it. compile_exec() is compile(source,
 * filename, "exec", dont_inherit=True) without that question: the same Py_CompileStringObject
 * with the same flags, so the same code object, the same errors and the same "compile" audit
 * event (raised by the parser). Its Python twin is builtins.compile (runner.compile_script),
 * which also takes whatever this returns NotImplemented for.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

PyDoc_STRVAR(compile_exec_doc,
"compile_exec(source, filename, /)\n--\n\n"
"compile(source, filename, 'exec', dont_inherit=True) for str or bytes source, without building\n"
"the ast module's types; NotImplemented for what compile() must say itself (other types, NUL).");

static PyObject* compile_exec(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    PyCompilerFlags flags;
    const char* text;
    Py_ssize_t size;
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "compile_exec(source: str | bytes, filename: str)");
        return NULL;
    }
    /* As builtin_compile_impl and _Py_SourceAsString read the source. */
    flags.cf_flags = PyCF_SOURCE_IS_UTF8;
    flags.cf_feature_version = PY_MINOR_VERSION;
    if (PyUnicode_Check(args[0])) {
        text = PyUnicode_AsUTF8AndSize(args[0], &size);
        if (text == NULL)
            return NULL;
        flags.cf_flags |= PyCF_IGNORE_COOKIE; /* already text: a coding cookie says nothing */
    } else if (PyBytes_Check(args[0])) {
        text = PyBytes_AS_STRING(args[0]);
        size = PyBytes_GET_SIZE(args[0]);
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (memchr(text, '\0', (size_t)size) != NULL)
        Py_RETURN_NOTIMPLEMENTED; /* compile()'s error (ValueError to 3.11, SyntaxError after) */
    return Py_CompileStringObject(text, args[1], Py_file_input, &flags, -1);
}

static PyMethodDef module_methods[] = {
    {"compile_exec", (PyCFunction)(void (*)(void))compile_exec, METH_FASTCALL, compile_exec_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "autonvtx._sourcecode",
    "The target's source compiled as `python SCRIPT` compiles it (runner.compile_script's fast path).",
    0,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__sourcecode(void)
{
    return PyModuleDef_Init(&module_def);
}
