/* autonvtx.report.nsys._sweep: the report's sweep (autonvtx/report/nsys/sweep.py, `Sweep.run`) in C,
 * reading the Nsight Systems export itself.
 *
 * Python builds the two queries (export.NsysExport.ranges_query / launches_query: the schema
 * logic stays there); this module runs them on its own read-only connection and walks ranges
 * and launches together exactly as `Sweep.run` does, returning the fields of a `Tally`. It calls
 * back into Python only where that is rare: the group label of a thread seen for the first time,
 * and the renaming of a name seen for the first time.
 *
 * SQLite without a build dependency on sqlite3.h or libsqlite3: the process already has SQLite
 * loaded by Python's _sqlite3 module, so the few functions used here are looked up in it at run
 * time (dlopen of that module with RTLD_NOLOAD, then dlsym: a handle's lookup covers the
 * libraries it depends on). Where they cannot be found, `unavailable()` says why and the Python
 * sweep runs.
 *
 * Whatever the Python sweep would read differently (a NULL time or thread, a kind of value the
 * queries do not give for an export nsys wrote, a sum past 64 bits) makes `run` return None: the
 * caller then runs the Python sweep, so the two never disagree.
 */
#include "sweep.h"
/* ---- the Tally's fields as Python objects */

static PyObject *work_list(const int64_t *work, int n)
{
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *number = PyLong_FromLongLong(work[i]);
        if (number == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, number);
    }
    return list;
}

#define SET_OR_FAIL(list, i, value)        \
    do {                                   \
        PyObject *v_ = (value);            \
        if (v_ == NULL) {                  \
            goto fail;                     \
        }                                  \
        PyList_SET_ITEM((list), (i), v_); \
    } while (0)

/* Tally.self_kernels, .outside and .repeated filled, each in the order its entries came: 0, or -1. */
static int dictionaries(Sweep *s, int nodes, PyObject *kernels, PyObject *outside_dict, PyObject *repeated)
{
    for (size_t i = 0; nodes && i < s->nkernels; i++) {
        KernelEntry *e = &s->kernels[i];
        PyObject *slot;
        if (e->tag == 0) {
            slot = Py_BuildValue("(iL)", e->node, (long long)e->value);
        } else if (e->tag == 1) {
            slot = Py_BuildValue("(iO)", e->node, PyList_GET_ITEM(s->strings, e->value));
        } else {
            slot = Py_BuildValue("(iO)", e->node, Py_None);
        }
        PyObject *seen = Py_BuildValue("[LL]", (long long)e->count, (long long)e->ns);
        int failed = slot == NULL || seen == NULL || PyDict_SetItem(kernels, slot, seen) < 0;
        Py_XDECREF(slot);
        Py_XDECREF(seen);
        if (failed) {
            return -1;
        }
    }
    for (size_t i = 0; i < s->noutside; i++) {
        PyObject *work = work_list(s->outside[i].work, NWORK);
        int failed =
            work == NULL || PyDict_SetItem(outside_dict, PyList_GET_ITEM(s->groups, s->outside[i].group), work) < 0;
        Py_XDECREF(work);
        if (failed) {
            return -1;
        }
    }
    for (size_t i = 0; nodes && i < s->nrepeats; i++) {
        PyObject *node = PyLong_FromLong(s->repeats[i].node);
        PyObject *work = work_list(s->repeats[i].work, NWORK);
        int failed = node == NULL || work == NULL || PyDict_SetItem(repeated, node, work) < 0;
        Py_XDECREF(node);
        Py_XDECREF(work);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

/* (keys, parent, key, group, shadowed, start_end, totals, self_kernels, outside, launched,
 * misnested, repeated): `Tally`'s fields in its order; without `nodes`, the per-node lists and
 * the self_kernels and repeated dictionaries left empty (the rows made here need none of them). */
static PyObject *tally(Sweep *s, int nodes)
{
    PyObject *keys = NULL, *parent = NULL, *key = NULL, *group = NULL, *shadowed = NULL, *start_end = NULL,
             *totals = NULL, *kernels = NULL, *outside_dict = NULL, *launched = NULL, *repeated = NULL;
    Py_ssize_t n = nodes ? (Py_ssize_t)s->nodes : 0;
    keys = PyList_New((Py_ssize_t)s->nkeys);
    parent = PyList_New(n);
    key = PyList_New(n);
    group = PyList_New(n);
    shadowed = PyList_New(n);
    start_end = PyList_New(n);
    totals = PyList_New(n);
    kernels = PyDict_New();
    outside_dict = PyDict_New();
    repeated = PyDict_New();
    launched = work_list(s->launched, NWORK);
    if (!keys || !parent || !key || !group || !shadowed || !start_end || !totals || !kernels || !outside_dict ||
        !repeated || !launched) {
        goto fail;
    }
    for (size_t k = 0; k < s->nkeys; k++) {
        PyObject *name = PyList_GET_ITEM(s->strings, s->key_sid[k]);
        SET_OR_FAIL(keys, (Py_ssize_t)k, Py_BuildValue("(LO)", (long long)s->key_domain[k], name));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        SET_OR_FAIL(parent, i, PyLong_FromLong(s->parent[i]));
        SET_OR_FAIL(key, i, PyLong_FromLong(s->key[i]));
        PyObject *label = PyList_GET_ITEM(s->groups, s->group[i]);
        Py_INCREF(label);
        PyList_SET_ITEM(group, i, label);
        SET_OR_FAIL(shadowed, i, PyBool_FromLong(s->shadowed[i]));
        SET_OR_FAIL(start_end, i, PyBool_FromLong(s->start_end[i]));
        SET_OR_FAIL(totals, i, work_list(&s->totals[(size_t)i * NTOTALS], NTOTALS));
    }
    if (dictionaries(s, nodes, kernels, outside_dict, repeated) < 0) {
        goto fail;
    }
    return Py_BuildValue("(NNNNNNNNNNLN)", keys, parent, key, group, shadowed, start_end, totals, kernels,
                         outside_dict, launched, (long long)s->misnested, repeated);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(parent);
    Py_XDECREF(key);
    Py_XDECREF(group);
    Py_XDECREF(shadowed);
    Py_XDECREF(start_end);
    Py_XDECREF(totals);
    Py_XDECREF(kernels);
    Py_XDECREF(outside_dict);
    Py_XDECREF(launched);
    Py_XDECREF(repeated);
    return NULL;
}

/* The Tally's fields and its rows (None: not asked for, or left to build_rows): a new tuple, or
 * NULL with a Python error (both references are taken). */
static PyObject *with_rows(PyObject *fields, PyObject *rows)
{
    PyObject *all = NULL;
    if (fields != NULL && rows != NULL && (all = PyTuple_New(PyTuple_GET_SIZE(fields) + 1)) != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
            PyTuple_SET_ITEM(all, i, Py_NewRef(PyTuple_GET_ITEM(fields, i)));
        }
        PyTuple_SET_ITEM(all, PyTuple_GET_SIZE(fields), Py_NewRef(rows));
    }
    Py_XDECREF(fields);
    Py_XDECREF(rows);
    return all;
}

static void sweep_free(Sweep *s)
{
    Py_XDECREF(s->strings);
    Py_XDECREF(s->sid_of);
    Py_XDECREF(s->groups);
    Py_XDECREF(s->gid_of);
    free(s->texts.slots);
    free(s->texts.bytes);
    free(s->raw_sid);
    free(s->raw_renamed);
    free(s->raw_at);
    free(s->raw_length);
    free(s->group_root);
    free(s->group_outside);
    for (size_t i = 0; i < s->nthreads; i++) {
        free(s->threads[i].stack.items);
        free(s->threads[i].active.items);
    }
    free(s->threads);
    free(s->parent);
    free(s->key);
    free(s->group);
    free(s->shadowed);
    free(s->start_end);
    free(s->totals);
    free(s->key_domain);
    free(s->key_sid);
    free(s->counted);
    free(s->kernels);
    free(s->repeats);
    free(s->outside);
    map_free(&s->thread_of);
    map_free(&s->node_of);
    free(s->next_key);
    free(s->first_key);
    free(s->owner);
    free(s->owned);
    free(s->renumbered_keys);
    map_free(&s->names);
    map_free(&s->kernel_of);
    map_free(&s->repeat_of);
    map_free(&s->renumbered);
}

PyObject *SQLiteError;

PyDoc_STRVAR(run_doc,
             "run(uri, ranges, launches, group_of, rename, only_with_work, renumbered, hint=0, rows=None, order=False)\n--\n\n"
             "Sweep an export's ranges and launches as sweep.Sweep.run does. `uri`: the export as\n"
             "export._connect opens it; `ranges`: (sql, args) or None, ordered unless `order` asks\n"
             "to read them whole and order them here; `launches`: (sql, args) ordered, or\n"
             "export.launch_join's plan to join them here, or None; `group_of`: globalTid\n"
             "-> group label; `rename`: str -> str or None; `renumbered`: {(globalPid, domainId): key};\n"
             "`hint`: about how many NVTX events the export holds (its tables are sized for them);\n"
             "`rows`: None, or (Row, Work, KernelShare, domain_name, kernel_names, top) to make the\n"
             "rows per name as views.build_rows does. Returns Tally's fields as a tuple (its rows\n"
             "last, None where not made), or None where the Python sweep must run instead;\n"
             "raises SQLiteError (SQLite's message) where the export cannot be read.");

/* The state's tables and texts made (sized for `hint` events), labels' renumbered domains
 * read: 0, or -1 with a Python error. */
static int sweep_init(Sweep *s, Py_ssize_t hint, PyObject *renumbered)
{
    s->strings = PyList_New(0);
    s->groups = PyList_New(0);
    s->gid_of = PyDict_New();
    /* Tables sized for the export (`hint`: about how many NVTX events it holds) from the start:
     * growing them step by step costs more (each step a new table, its pages faulted in). */
    size_t expected = hint > 0 ? (size_t)hint : 0, size = 1024;
    while (size < expected * 2 && size < PRESIZED_AT_MOST) {
        size *= 2;
    }
    s->texts.slots = calloc(size, sizeof(TextSlot));
    s->texts.mask = size - 1;
    s->renumbered_keys = malloc((size_t)(PyDict_GET_SIZE(renumbered) + 1) * sizeof(int64_t));
    if (!s->strings || !s->groups || !s->gid_of || !s->texts.slots || !s->renumbered_keys ||
        map_init(&s->thread_of, 0, 64) || map_init(&s->node_of, expected, 1024) || map_init(&s->names, 0, 64) ||
        map_init(&s->kernel_of, 0, 1024) || map_init(&s->repeat_of, 0, 64) ||
        map_init(&s->renumbered, (size_t)PyDict_GET_SIZE(renumbered), 64)) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    /* "" first, as a text read (the empty name and the key of a NULL one are the same str) */
    int32_t raw = raw_text(s, "", 0);
    if (raw < 0) {
        return -1;
    }
    s->empty_sid = s->raw_sid[raw];
    Py_ssize_t at = 0;
    PyObject *pair, *value;
    while (PyDict_Next(renumbered, &at, &pair, &value)) {
        long long pid, domain, key;
        if (!PyArg_ParseTuple(pair, "LL", &pid, &domain) || (key = PyLong_AsLongLong(value), PyErr_Occurred())) {
            return -1;
        }
        Slot *slot = map_find(&s->renumbered, pid, domain, 0);
        int32_t index = (int32_t)s->renumbered.count;
        if (!USED(slot)) {
            s->renumbered_keys[index] = key;
            if (map_claim(&s->renumbered, slot, pid, domain, 0, index) < 0) {
                PyErr_NoMemory();
                return -1;
            }
        }
    }
    return 0;
}

/* Whether `launches` is export.launch_join's plan ((sql, args) of the calls, then the parts)
 * rather than the ordered query (sql, args): its first item is a query, not a str. */
static int is_join(PyObject *launches)
{
    return launches != Py_None && PyTuple_Check(launches) && PyTuple_GET_SIZE(launches) == 2 &&
           PyTuple_Check(PyTuple_GET_ITEM(launches, 0));
}

/* The export opened, the ranges' query prepared and its first row read (all its rows, where
 * `order` asks to order them here) before the launches are (in the order the Python sweep's
 * cursors run), then swept: an outcome. */
static int open_and_sweep(Sweep *s, const char *uri, PyObject *ranges_query, PyObject *launches_query, int order,
                          size_t hint, sqlite3 **db, Ranges *ranges, Launches *launches)
{
    /* As export._connect: the URI (read-only, immutable) with the flags Python's connect uses,
     * then query_only; NOMUTEX besides: the connection is this call's alone (SQLite then takes
     * no lock in each sqlite3_column_* call). No memory-mapped I/O: a file cut while it is read
     * would be a SIGBUS, not a message. */
    if (open_read_only(uri, db) != 0) {
        return SQLERROR;
    }
    int failed = 0, outcome;
    ranges->first = SQLITE_DONE;
    ranges->stmt = prepare(s, *db, ranges_query, &failed);
    if (failed) {
        return failed;
    }
    if (ranges->stmt != NULL) {
        ranges->first = sq.step(ranges->stmt);
        if (ranges->first != SQLITE_ROW && ranges->first != SQLITE_DONE) {
            return SQLERROR;
        }
        if (order && (outcome = order_ranges(s, ranges, hint)) != ROW) {
            return outcome;
        }
    }
    if (is_join(launches_query)) {
        if ((outcome = join_launches(s, *db, launches_query, launches)) != ROW) {
            return outcome;
        }
    } else {
        launches->stmt = prepare(s, *db, launches_query, &failed);
        if (failed) {
            return failed;
        }
    }
    return sweep(s, ranges, launches);
}

static PyObject *run(PyObject *module, PyObject *args)
{
    (void)module;
    const char *uri;
    PyObject *ranges_query, *launches_query, *group_of, *rename, *renumbered, *parts = Py_None;
    int only_with_work, order = 0;
    Py_ssize_t hint = 0;
    if (!PyArg_ParseTuple(args, "sOOOOpO!|nOp", &uri, &ranges_query, &launches_query, &group_of, &rename,
                          &only_with_work, &PyDict_Type, &renumbered, &hint, &parts, &order)) {
        return NULL;
    }
    if (resolve_sqlite() < 0) {
        Py_RETURN_NONE;
    }
    Sweep s;
    memset(&s, 0, sizeof s);
    s.group_of = group_of;
    s.rename = rename;
    s.only_with_work = only_with_work;
    PyObject *result = NULL;
    sqlite3 *db = NULL;
    Ranges ranges;
    Launches launches;
    memset(&ranges, 0, sizeof ranges);
    memset(&launches, 0, sizeof launches);
    if (sweep_init(&s, hint, renumbered) == 0) {
        int outcome = open_and_sweep(&s, uri, ranges_query, launches_query, order, hint > 0 ? (size_t)hint : 0, &db,
                                     &ranges, &launches);
        if (outcome == SQLERROR) {
            PyErr_SetString(SQLiteError, db ? sq.errmsg(db) : "out of memory");
        } else if (outcome == UNSUPPORTED || (outcome == ROW && s.overflow)) {
            result = Py_None;
            Py_INCREF(result);
        } else if (outcome == ROW) {
            /* The rows first: the tally keeps its nodes unless they were made (`rows_only` asks). */
            int rows_only = 0;
            PyObject *rows = parts == Py_None ? Py_NewRef(Py_None) : sweep_rows(&s, parts, &rows_only);
            result = rows == NULL ? NULL : with_rows(tally(&s, !(rows_only && rows != Py_None)), rows);
        }
    }
    free(ranges.items);
    free(launches.items);
    if (ranges.stmt) {
        sq.finalize(ranges.stmt);
    }
    if (launches.stmt) {
        sq.finalize(launches.stmt);
    }
    if (db) {
        sq.close(db);
    }
    sweep_free(&s);
    return result;
}

static PyObject *unavailable(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (resolve_sqlite() < 0) {
        return PyUnicode_FromString(sq.missing);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, run_doc},
    {"wrong_type", wrong_type, METH_VARARGS, wrong_type_doc},
    {"unavailable", unavailable, METH_NOARGS,
     PyDoc_STR("None when SQLite's functions were found in the process; else why not (the Python sweep runs).")},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *module)
{
    SQLiteError = PyErr_NewExceptionWithDoc("autonvtx.report.nsys._sweep.SQLiteError",
                                            "SQLite could not read the export (the message is SQLite's).", NULL, NULL);
    if (SQLiteError == NULL) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "SQLiteError", SQLiteError);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "autonvtx.report.nsys._sweep",
    .m_doc = "The report's sweep of an Nsight Systems export in C (see autonvtx/report/nsys/sweep.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__sweep(void)
{
    return PyModuleDef_Init(&definition);
}
