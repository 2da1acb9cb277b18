/* The rows per range name (report/views.py's build_rows and _add_top_kernels) made from the
 * sweep's own tables, before they are freed: the `Row`, `Work` and `KernelShare` objects
 * themselves, so that Python neither walks the Tally's per-node lists nor makes a row's
 * objects attribute by attribute. views.build_rows stays the twin (the Python sweep's rows, and
 * tests/test_sweep_native.py holds the two equal). */
#include "sweep.h"

#include <structmember.h> /* T_OBJECT_EX, READONLY: a member descriptor's kind */

typedef struct {
    int32_t group, key;
    int64_t instances, cpu, span;
    int64_t work[NWORK];
} RowSum;

/* A kernel's part of one row: the row, the kernel (tag and value as in KernelEntry), its sums,
 * and where it came in the row's list (the Python's order, which a stable sort keeps on ties). */
typedef struct {
    int32_t row, tag;
    int64_t value, count, ns;
    size_t seq;
} Share;

/* The kernel as Python holds it (the Tally's self_kernels key): a new reference, or NULL. */
static PyObject *kernel_object(Sweep *s, int32_t tag, int64_t value)
{
    if (tag == 0) {
        return PyLong_FromLongLong(value);
    }
    PyObject *kernel = tag == 1 ? PyList_GET_ITEM(s->strings, value) : Py_None;
    Py_INCREF(kernel);
    return kernel;
}

/* str(kernel), as the Python breaks ties between kernels of equal time and count. */
static PyObject *kernel_text(Sweep *s, const Share *share)
{
    if (share->tag == 2) {
        return PyUnicode_FromString("None");
    }
    PyObject *kernel = kernel_object(s, share->tag, share->value);
    if (kernel == NULL) {
        return NULL;
    }
    PyObject *text = PyObject_Str(kernel);
    Py_DECREF(kernel);
    return text;
}

static Sweep *sorting; /* qsort's comparison has no context argument; the GIL is held throughout */
static int sort_failed;

/* Most time first, then most launches, then str(kernel), then the order the kernels came in. */
static int by_share(const void *left, const void *right)
{
    const Share *a = left, *b = right;
    if (sort_failed) { /* qsort goes on comparing: no more calls into Python with an error set */
        return 0;
    }
    if (a->ns != b->ns) {
        return a->ns > b->ns ? -1 : 1;
    }
    if (a->count != b->count) {
        return a->count > b->count ? -1 : 1;
    }
    if (a->tag != b->tag || a->value != b->value) {
        PyObject *ta = kernel_text(sorting, a), *tb = kernel_text(sorting, b);
        int order = 0;
        if (ta == NULL || tb == NULL) {
            sort_failed = 1;
        } else {
            order = PyUnicode_Compare(ta, tb);
            if (order == -1 && PyErr_Occurred()) {
                sort_failed = 1;
                order = 0;
            }
        }
        Py_XDECREF(ta);
        Py_XDECREF(tb);
        if (order != 0) {
            return order;
        }
    }
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* How a dataclass's objects are made here: its fields' names in their order and, where the class
 * keeps each in a slot of its own (`__slots__`, as report.figures' do), the slots' offsets. */
typedef struct {
    PyTypeObject *type;
    PyObject *const *names;
    int direct;               /* 1: allocated and its slots filled in place */
    Py_ssize_t offsets[9];
} Layout;

/* The layout of `type`: direct where the class is plainly made (object's __new__, no dict, not
 * abstract) and every field is a writable object slot (the member descriptor __slots__ makes). */
static void layout_of(Layout *layout, PyObject *type, PyObject *const *names, int n)
{
    PyTypeObject *cls = (PyTypeObject *)type;
    layout->type = cls;
    layout->names = names;
    layout->direct = cls->tp_new == PyBaseObject_Type.tp_new && cls->tp_alloc != NULL && cls->tp_dictoffset == 0 &&
                     !(cls->tp_flags & Py_TPFLAGS_IS_ABSTRACT);
#ifdef Py_TPFLAGS_MANAGED_DICT
    layout->direct = layout->direct && !(cls->tp_flags & Py_TPFLAGS_MANAGED_DICT);
#endif
    for (int i = 0; i < n && layout->direct; i++) {
        PyObject *descr = PyObject_GetAttr(type, names[i]);
        if (descr == NULL) {
            PyErr_Clear();
            layout->direct = 0;
            break;
        }
        PyMemberDef *member = Py_IS_TYPE(descr, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)descr)->d_member : NULL;
        if (member == NULL || member->type != T_OBJECT_EX || (member->flags & READONLY)) {
            layout->direct = 0;
        } else {
            layout->offsets[i] = member->offset;
        }
        Py_DECREF(descr);
    }
}

/* An object of a dataclass made without its __init__ (a call of it costs more: measured), its
 * fields given in their order: filled in place where its layout allows, else set one by one in
 * that order (the order its __init__ sets them, so the object is laid out as Python's are). */
static PyObject *made(const Layout *layout, PyObject *const *values, int n)
{
    PyTypeObject *cls = layout->type;
    if (layout->direct) {
        PyObject *object = cls->tp_alloc(cls, 0); /* zeroed: every slot empty */
        if (object != NULL) {
            for (int i = 0; i < n; i++) {
                *(PyObject **)((char *)object + layout->offsets[i]) = Py_NewRef(values[i]);
            }
        }
        return object;
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    PyObject *object = cls->tp_new(cls, empty, NULL);
    Py_DECREF(empty);
    if (object == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (PyObject_GenericSetAttr(object, layout->names[i], values[i]) < 0) {
            Py_DECREF(object);
            return NULL;
        }
    }
    return object;
}

static PyObject *WORK_NAMES[NWORK], *ROW_NAMES[9], *SHARE_NAMES[3];

static int intern_names(void)
{
    static const char *work[NWORK] = {"kernels", "kernel_ns",  "memcpy", "memcpy_bytes",
                                      "memcpy_ns", "memset", "memset_bytes", "memset_ns"};
    static const char *row[9] = {"group", "domain", "name", "instances", "cpu_ns", "span_ns",
                                 "work", "top_kernels", "stats"};
    static const char *share[3] = {"name", "count", "ns"};
    if (ROW_NAMES[0] != NULL) {
        return 0;
    }
    for (int i = 0; i < NWORK; i++) {
        if ((WORK_NAMES[i] = PyUnicode_InternFromString(work[i])) == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < 3; i++) {
        if ((SHARE_NAMES[i] = PyUnicode_InternFromString(share[i])) == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < 9; i++) {
        if ((ROW_NAMES[i] = PyUnicode_InternFromString(row[i])) == NULL) {
            return -1;
        }
    }
    return 0;
}

/* Values made from integers, set, and released: a new object or NULL. */
static PyObject *made_of_integers(const Layout *layout, const int64_t *numbers, int n, PyObject *first)
{
    PyObject *values[NWORK + 1];
    int at = 0, made_here = 0;
    if (first != NULL) {
        values[at++] = first;
    }
    for (int i = 0; i < n; i++) {
        if ((values[at + i] = PyLong_FromLongLong(numbers[i])) == NULL) {
            break;
        }
        made_here++;
    }
    PyObject *object = made_here == n ? made(layout, values, at + n) : NULL;
    for (int i = 0; i < made_here; i++) {
        Py_DECREF(values[at + i]);
    }
    return object;
}

static int all_zero(const int64_t *work)
{
    for (int i = 0; i < NWORK; i++) {
        if (work[i]) {
            return 0;
        }
    }
    return 1;
}

/* The row sums: one per (group, key), in the order of their first node, as build_rows makes
 * them. `slot_row` gets each node's row (-1: none). The number of rows, or -1 (no memory). */
static Py_ssize_t sum_rows(Sweep *s, RowSum **into, int32_t *slot_row, Map *row_of)
{
    RowSum *rows = NULL;
    size_t count = 0, capacity = 0;
    for (size_t node = 0; node < s->nodes; node++) {
        slot_row[node] = -1;
        const int64_t *totals = &s->totals[node * NTOTALS];
        if (s->key[node] < 0 || totals[INSTANCES] == 0) {
            continue;
        }
        Slot *slot = map_find(row_of, s->group[node], s->key[node], 0);
        RowSum *row;
        if (USED(slot)) {
            row = &rows[VALUE(slot)];
        } else {
            GROW(rows, count, capacity, {
                free(rows);
                return -1;
            });
            row = &rows[count];
            memset(row, 0, sizeof *row);
            row->group = s->group[node];
            row->key = s->key[node];
            if (map_claim(row_of, slot, s->group[node], s->key[node], 0, (int32_t)count++) < 0) {
                free(rows);
                return -1;
            }
        }
        slot_row[node] = (int32_t)(row - rows);
        add(s, &row->instances, totals[INSTANCES]);
        if (!s->shadowed[node]) {
            add(s, &row->cpu, totals[CPU_NS]);
            add(s, &row->span, totals[SPAN_NS]);
            for (int i = 0; i < NWORK; i++) {
                add(s, &row->work[i], totals[WORK + i]);
            }
        }
    }
    /* Work a start/end range's node holds that its name already counted: the rows leave it out. */
    for (size_t i = 0; i < s->nrepeats; i++) {
        int32_t node = s->repeats[i].node;
        if (slot_row[node] >= 0 && !s->shadowed[node]) {
            int64_t *work = rows[slot_row[node]].work;
            for (int k = 0; k < NWORK; k++) {
                add(s, &work[k], difference(s, 0, s->repeats[i].work[k]));
            }
        }
    }
    *into = rows;
    return (Py_ssize_t)count;
}

/* Each kernel's part of every distinct name enclosing the range that launched it, per row in
 * the order _add_top_kernels meets them: nodes in the order their first kernel came, each
 * walked up through its enclosing nodes. The number of shares, or -1 (no memory). */
static Py_ssize_t kernel_shares(Sweep *s, Map *row_of, Share **into)
{
    size_t n = s->nkernels;
    int32_t *first = malloc((s->nodes ? s->nodes : 1) * sizeof *first);
    size_t *order = malloc((n ? n : 1) * sizeof *order), *start = NULL;
    int32_t *nodes = malloc((n ? n : 1) * sizeof *nodes); /* the nodes, in the order they came */
    Share *shares = NULL;
    size_t count = 0, capacity = 0;
    Map share_of = {0};
    Py_ssize_t result = -1;
    if (first == NULL || order == NULL || nodes == NULL || map_init(&share_of, n, 1024) < 0) {
        goto done;
    }
    for (size_t i = 0; i < s->nodes; i++) {
        first[i] = -1;
    }
    size_t nnodes = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t node = s->kernels[i].node;
        if (first[node] < 0) {
            first[node] = (int32_t)nnodes;
            nodes[nnodes++] = node;
        }
    }
    /* A node's kernels together, in the order they came (a stable counting sort). */
    start = calloc(nnodes + 1, sizeof *start);
    if (start == NULL) {
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        start[first[s->kernels[i].node] + 1]++;
    }
    for (size_t i = 0; i < nnodes; i++) {
        start[i + 1] += start[i];
    }
    for (size_t i = 0; i < n; i++) {
        order[start[first[s->kernels[i].node]]++] = i;
    }
    for (size_t at = 0, i = 0; i < nnodes; i++) {
        size_t from = at;
        at = start[i];
        for (int32_t walk = nodes[i]; walk >= 0 && s->key[walk] >= 0; walk = s->parent[walk]) {
            if (s->shadowed[walk]) {
                continue;
            }
            Slot *found = map_find(row_of, s->group[walk], s->key[walk], 0);
            if (!USED(found)) {
                continue; /* a name without a row (no instance counted): its kernels are left out */
            }
            int32_t row = VALUE(found);
            for (size_t k = from; k < at; k++) {
                const KernelEntry *e = &s->kernels[order[k]];
                Slot *slot = map_find(&share_of, row, e->value, e->tag);
                if (USED(slot)) {
                    Share *share = &shares[VALUE(slot)];
                    add(s, &share->count, e->count);
                    add(s, &share->ns, e->ns);
                    continue;
                }
                GROW(shares, count, capacity, goto done);
                shares[count] = (Share){row, e->tag, e->value, e->count, e->ns, count};
                if (map_claim(&share_of, slot, row, e->value, e->tag, (int32_t)count++) < 0) {
                    goto done;
                }
            }
        }
    }
    *into = shares;
    shares = NULL;
    result = (Py_ssize_t)count;
done:
    free(first);
    free(order);
    free(start);
    free(nodes);
    free(shares);
    map_free(&share_of);
    return result;
}

/* A row's shares together, in the order they came (a counting sort by row): after it,
 * start[row] is where the row's shares end in `sorted`; they begin where the previous row's end. */
static void shares_by_row(const Share *shares, size_t count, size_t nrows, size_t *start, Share *sorted)
{
    for (size_t i = 0; i < count; i++) {
        start[shares[i].row + 1]++;
    }
    for (size_t i = 0; i < nrows; i++) {
        start[i + 1] += start[i];
    }
    for (size_t i = 0; i < count; i++) {
        sorted[start[shares[i].row]++] = shares[i];
    }
}

/* Each row's first `top` shares (sorted) as KernelShare objects named through `names`, appended
 * to the row's top_kernels list. 0, or -1 with a Python error. */
static int append_shares(Sweep *s, const Share *sorted, const size_t *start, size_t nrows, PyObject *const *lists,
                         const Layout *share_layout, PyObject *names, Py_ssize_t top)
{
    for (size_t row = 0, from = 0; row < nrows; from = start[row++]) {
        size_t n = start[row] - from, kept = n > (size_t)top ? (size_t)top : n;
        PyObject *list = lists[row]; /* the row's top_kernels (the row holds it) */
        for (size_t k = from; k < from + kept; k++) {
            PyObject *kernel = kernel_object(s, sorted[k].tag, sorted[k].value), *name = NULL, *share = NULL;
            if (kernel != NULL) {
                name = PyObject_GetItem(names, kernel);
            }
            if (name != NULL) {
                int64_t numbers[2] = {sorted[k].count, sorted[k].ns};
                share = made_of_integers(share_layout, numbers, 2, name);
            }
            int failed = share == NULL || PyList_Append(list, share) < 0;
            Py_XDECREF(kernel);
            Py_XDECREF(name);
            Py_XDECREF(share);
            if (failed) {
                return -1;
            }
        }
    }
    return 0;
}

/* Each row's top kernels (at most `top`, as _add_top_kernels chooses them) as KernelShare
 * objects, appended to the rows' top_kernels lists. 0, or -1 with a Python error. */
static int top_kernels(Sweep *s, Share *shares, size_t count, size_t nrows, PyObject *const *lists,
                       const Layout *share_layout, PyObject *kernel_names, Py_ssize_t top)
{
    size_t *start = calloc(nrows + 1, sizeof *start);
    Share *sorted = malloc((count ? count : 1) * sizeof *sorted);
    PyObject *wanted = PyList_New(0), *names = NULL;
    Map wanted_of = {0};
    int result = -1;
    if (start == NULL || sorted == NULL || wanted == NULL || map_init(&wanted_of, 0, 1024) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    shares_by_row(shares, count, nrows, start, sorted);
    sorting = s;
    sort_failed = 0;
    for (size_t row = 0, from = 0; row < nrows; from = start[row++]) {
        size_t n = start[row] - from;
        if (n > 1) {
            qsort(&sorted[from], n, sizeof *sorted, by_share);
            if (sort_failed) {
                goto done;
            }
        }
        size_t kept = n > (size_t)top ? (size_t)top : n;
        for (size_t k = from; k < from + kept; k++) {
            Slot *slot = map_find(&wanted_of, sorted[k].value, 0, sorted[k].tag);
            if (USED(slot)) {
                continue;
            }
            PyObject *kernel = kernel_object(s, sorted[k].tag, sorted[k].value);
            int failed = kernel == NULL || PyList_Append(wanted, kernel) < 0;
            Py_XDECREF(kernel);
            if (failed || map_claim(&wanted_of, slot, sorted[k].value, 0, sorted[k].tag, 0) < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_NoMemory();
                }
                goto done;
            }
        }
    }
    if (PyList_GET_SIZE(wanted) == 0) {
        result = 0;
        goto done;
    }
    names = PyObject_CallOneArg(kernel_names, wanted);
    if (names == NULL) {
        goto done;
    }
    result = append_shares(s, sorted, start, nrows, lists, share_layout, names, top);
done:
    free(start);
    free(sorted);
    Py_XDECREF(wanted);
    Py_XDECREF(names);
    map_free(&wanted_of);
    return result;
}

/* The domain's name as `domain_name` gives it, asked once a domain (a few per export). */
static PyObject *domain_shown(PyObject *cache, PyObject *domain_name, int64_t domain)
{
    PyObject *key = PyLong_FromLongLong(domain);
    if (key == NULL) {
        return NULL;
    }
    PyObject *shown = PyDict_GetItemWithError(cache, key);
    if (shown != NULL) {
        Py_DECREF(key);
        return shown;
    }
    if (PyErr_Occurred() || (shown = PyObject_CallOneArg(domain_name, key)) == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    int failed = PyDict_SetItem(cache, key, shown) < 0;
    Py_DECREF(key);
    Py_DECREF(shown);
    return failed ? NULL : shown; /* borrowed: the cache holds it */
}

/* Where Row's, Work's and KernelShare's fields lie in their objects. 0, or -1 with a Python
 * error (a class that is not one). */
static int layouts(PyObject *row_type, PyObject *work_type, PyObject *share_type, Layout *row_layout,
                   Layout *work_layout, Layout *share_layout)
{
    if (!PyType_Check(row_type) || !PyType_Check(work_type) || !PyType_Check(share_type)) {
        PyErr_SetString(PyExc_TypeError, "sweep rows: Row, Work and KernelShare must be classes");
        return -1;
    }
    if (intern_names() < 0) {
        return -1;
    }
    layout_of(row_layout, row_type, ROW_NAMES, 9);
    layout_of(work_layout, work_type, WORK_NAMES, NWORK);
    layout_of(share_layout, share_type, SHARE_NAMES, 3);
    return 0;
}

/* The Row of `sum` (`shown`: its domain as shown); `*kernels` gets its top_kernels list, empty
 * (borrowed: the row holds it). NULL with a Python error. */
static PyObject *row_object(Sweep *s, const RowSum *sum, const Layout *row_layout, const Layout *work_layout,
                            PyObject *idle, PyObject *shown, PyObject **kernels_out)
{
    PyObject *work = idle;
    if (all_zero(sum->work)) {
        Py_INCREF(work);
    } else if ((work = made_of_integers(work_layout, sum->work, NWORK, NULL)) == NULL) {
        return NULL;
    }
    PyObject *numbers[3] = {PyLong_FromLongLong(sum->instances), PyLong_FromLongLong(sum->cpu),
                            PyLong_FromLongLong(sum->span)};
    PyObject *kernels = PyList_New(0), *row = NULL;
    if (numbers[0] && numbers[1] && numbers[2] && kernels) {
        PyObject *values[9] = {PyList_GET_ITEM(s->groups, sum->group),
                               shown,
                               PyList_GET_ITEM(s->strings, s->key_sid[sum->key]),
                               numbers[0],
                               numbers[1],
                               numbers[2],
                               work,
                               kernels,
                               Py_None};
        row = made(row_layout, values, 9);
    }
    for (int k = 0; k < 3; k++) {
        Py_XDECREF(numbers[k]);
    }
    Py_XDECREF(kernels);
    Py_DECREF(work);
    *kernels_out = kernels;
    return row;
}

PyObject *sweep_rows(Sweep *s, PyObject *parts, int *rows_only)
{
    PyObject *row_type, *work_type, *share_type, *domain_name, *kernel_names;
    Py_ssize_t top;
    if (!PyArg_ParseTuple(parts, "OOOOOn|p", &row_type, &work_type, &share_type, &domain_name, &kernel_names, &top,
                          rows_only)) {
        return NULL;
    }
    Layout row_layout, work_layout, share_layout;
    if (layouts(row_type, work_type, share_type, &row_layout, &work_layout, &share_layout) < 0) {
        return NULL;
    }
    RowSum *sums = NULL;
    Share *shares = NULL;
    int32_t *slot_row = malloc((s->nodes ? s->nodes : 1) * sizeof *slot_row);
    PyObject **lists = NULL; /* per row: its top_kernels list (borrowed: the row holds it) */
    Map row_of = {0};
    PyObject *rows = NULL, *domains = PyDict_New(), *idle = NULL, *result = NULL;
    if (slot_row == NULL || domains == NULL || map_init(&row_of, s->nodes, 1024) < 0) {
        goto fail;
    }
    Py_ssize_t nrows = sum_rows(s, &sums, slot_row, &row_of);
    if (nrows < 0) {
        goto fail;
    }
    Py_ssize_t nshares = kernel_shares(s, &row_of, &shares);
    if (nshares < 0) {
        goto fail;
    }
    if (s->overflow) { /* a sum past 64 bits: build_rows makes the rows from the Tally */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    int64_t zeros[NWORK] = {0};
    idle = made_of_integers(&work_layout, zeros, NWORK, NULL); /* the rows without work share it */
    rows = PyList_New(nrows);
    lists = malloc((nrows ? (size_t)nrows : 1) * sizeof *lists);
    if (lists == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (idle == NULL || rows == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nrows; i++) {
        PyObject *shown = domain_shown(domains, domain_name, s->key_domain[sums[i].key]);
        PyObject *row = shown ? row_object(s, &sums[i], &row_layout, &work_layout, idle, shown, &lists[i]) : NULL;
        if (row == NULL) {
            goto done;
        }
        PyList_SET_ITEM(rows, i, row);
    }
    if (top_kernels(s, shares, (size_t)nshares, (size_t)nrows, lists, &share_layout, kernel_names, top) < 0) {
        goto done;
    }
    result = rows;
    rows = NULL;
    goto done;
fail:
    if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
done:
    free(sums);
    free(shares);
    free(slot_row);
    free(lists);
    map_free(&row_of);
    Py_XDECREF(rows);
    Py_XDECREF(domains);
    Py_XDECREF(idle);
    return result;
}
