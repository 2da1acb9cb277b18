/* The native sweep's rows read whole and put in order here, for an export small enough to hold
 * them in memory (sweep.py decides). The SQL costs more than the C: the ranges' ORDER BY runs
 * SQLite's sorter over every row with its text, and the launches' query scans the runtime calls
 * once per kind of work and builds an index of that kind's rows each time (on the two-GPU
 * torch fixture, about 40% of the whole report's instructions).
 *
 * The order is the SQL's exactly, so that the Python sweep (which runs the ordered queries)
 * finds the same, and total, so that no query plan decides it: ranges by start, then end latest
 * first, then rowid; launches by export.LAUNCH_ORDER, which orders by every column (no two
 * launches the walk tells apart are left to the sort). */
#include "sweep.h"

/* ---- ranges */

static int by_start(const void *a, const void *b)
{
    const Range *x = a, *y = b;
    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    if (x->end != y->end) {
        return x->end > y->end ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

/* Arrays are sized for the hint up to this many ranges; past it they grow as they fill. */
#define PRESIZED_RANGES ((size_t)1 << 22)

/* Every range of the unordered query `ranges->stmt` (its first step gave `ranges->first`; its
 * seventh column the rowid) read, then ordered: ROW, or an outcome. `hint`: about how many NVTX
 * events the export holds (the array is sized for them: pages never written are never
 * touched). */
int order_ranges(Sweep *s, Ranges *ranges, size_t hint)
{
    if (hint > 0) {
        size_t items = hint < PRESIZED_RANGES ? hint : PRESIZED_RANGES;
        ranges->items = malloc(items * sizeof *ranges->items);
        ranges->capacity = ranges->items ? items : 0;
    }
    int outcome;
    Range r;
    while ((outcome = next_range(s, ranges, &r)) == ROW) {
        if (integer(ranges->stmt, 6, &r.row)) {
            s->unsupported = 1;
            return UNSUPPORTED;
        }
        GROW(ranges->items, ranges->count, ranges->capacity, {
            PyErr_NoMemory();
            return PYERROR;
        });
        ranges->items[ranges->count++] = r;
    }
    if (outcome != END) {
        return outcome;
    }
    qsort(ranges->items, ranges->count, sizeof *ranges->items, by_start);
    ranges->whole = 1;
    return ROW;
}

/* ---- launches */

/* The runtime calls by correlationId: per call its thread, start and the previous call of the
 * same correlationId (-1: none); `last` maps a correlationId to its latest call. */
typedef struct {
    int64_t *tid, *start;
    int32_t *previous;
    size_t count, capacity;
    Map last;
} Calls;

static void calls_free(Calls *c)
{
    free(c->tid);
    free(c->start);
    free(c->previous);
    map_free(&c->last);
}

/* The calls' arrays twice as long: 0, or -1 with a Python error. */
static int calls_grow(Calls *c)
{
    size_t grown = c->capacity ? c->capacity * 2 : 1024;
    int failed = grown > INT32_MAX;
    c->tid = grown_array(c->tid, grown, sizeof *c->tid, &failed);
    c->start = grown_array(c->start, grown, sizeof *c->start, &failed);
    c->previous = grown_array(c->previous, grown, sizeof *c->previous, &failed);
    if (failed) {
        PyErr_NoMemory();
        return -1;
    }
    c->capacity = grown;
    return 0;
}

/* The joined launches' array twice as long: 0, or -1 with a Python error. */
static int grow(Launches *out)
{
    size_t grown = out->capacity ? out->capacity * 2 : 1024;
    Joined *items = realloc(out->items, grown * sizeof *items);
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->items = items;
    out->capacity = grown;
    return 0;
}

static Sweep *ordering; /* qsort's comparison has no context argument (the texts' bytes); the GIL is held throughout */

static int compare_ints(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* As SQLite orders the kernel name column: NULL, then integers, then text by its bytes (memcmp,
 * then the shorter first: the BINARY collation). */
static int compare_names(const Launch *x, const Launch *y)
{
    static const int rank[3] = {1, 2, 0}; /* tag 0: integer, 1: text, 2: NULL */
    if (x->kernel_tag != y->kernel_tag) {
        return rank[x->kernel_tag] < rank[y->kernel_tag] ? -1 : 1;
    }
    if (x->kernel_tag == 0) {
        return compare_ints(x->kernel, y->kernel);
    }
    if (x->kernel_tag == 2 || x->kernel_raw == y->kernel_raw) {
        return 0;
    }
    size_t a = ordering->raw_length[x->kernel_raw], b = ordering->raw_length[y->kernel_raw];
    int c = memcmp(ordering->texts.bytes + ordering->raw_at[x->kernel_raw],
                   ordering->texts.bytes + ordering->raw_at[y->kernel_raw], a < b ? a : b);
    return c ? c : compare_ints((int64_t)a, (int64_t)b);
}

/* export.LAUNCH_ORDER: call start, kind, thread, GPU start, GPU end, device, name, bytes. */
static int by_launch_order(const void *a, const void *b)
{
    const Joined *x = a, *y = b;
    int c;
    if ((c = compare_ints(x->w.at, y->w.at)) || (c = compare_ints(x->w.kind, y->w.kind)) ||
        (c = compare_ints(x->w.global_tid, y->w.global_tid)) || (c = compare_ints(x->w.gpu_start, y->w.gpu_start)) ||
        (c = compare_ints(x->w.gpu_end, y->w.gpu_end))) {
        return c;
    }
    if (x->device_null != y->device_null) {
        return x->device_null ? -1 : 1;
    }
    if ((c = compare_ints(x->device, y->device)) || (c = compare_names(&x->w, &y->w))) {
        return c;
    }
    if (x->size_null != y->size_null) {
        return x->size_null ? -1 : 1;
    }
    return compare_ints(x->w.size, y->w.size);
}

/* A statement's loop over: its outcome (SQLERROR where its last step was neither a row nor the
 * end), the statement finalized. */
static int finished(sqlite3_stmt *stmt, int outcome, int rc)
{
    if (outcome == ROW && rc != SQLITE_DONE) {
        outcome = SQLERROR;
    }
    sq.finalize(stmt);
    return outcome;
}

/* The runtime calls of `query` read into `c`: ROW, or an outcome. A call without a
 * correlationId joins nothing, nor one without a thread where every kind of work joins calls of
 * its own process (`in_process`); any other value not an integer is left to the SQL. */
static int read_calls(Sweep *s, sqlite3 *db, PyObject *query, int in_process, Calls *c)
{
    int failed;
    sqlite3_stmt *stmt = prepare(s, db, query, &failed);
    if (failed || stmt == NULL) {
        return failed ? failed : ROW;
    }
    int rc = SQLITE_DONE, outcome = ROW;
    while (outcome == ROW && (rc = sq.step(stmt)) == SQLITE_ROW) {
        int64_t id, tid, start;
        int type = sq.column_type(stmt, 0);
        if (type == SQLITE_NULL || (in_process && sq.column_type(stmt, 1) == SQLITE_NULL)) {
            continue;
        }
        if (type != SQLITE_INTEGER || integer(stmt, 1, &tid) || integer(stmt, 2, &start)) {
            s->unsupported = 1;
            outcome = UNSUPPORTED;
            break;
        }
        id = sq.column_int64(stmt, 0);
        if (c->count == c->capacity && calls_grow(c) < 0) {
            outcome = PYERROR;
            break;
        }
        size_t i = c->count++;
        c->tid[i] = tid;
        c->start[i] = start;
        Slot *slot = map_find(&c->last, id, 0, 0);
        if (USED(slot)) {
            c->previous[i] = VALUE(slot);
            SET(slot, i);
        } else {
            c->previous[i] = -1;
            if (map_claim(&c->last, slot, id, 0, 0, (int32_t)i) < 0) {
                PyErr_NoMemory();
                outcome = PYERROR;
            }
        }
    }
    return finished(stmt, outcome, rc);
}

/* One kind of work (`part`: ((sql, args), same_process)) joined to the calls, into `out`: ROW,
 * or an outcome. As the SQL join: a row without a correlationId, or (same process asked)
 * without a process, joins nothing; a row joins each call of its correlationId (of its
 * process: globalTid >> 24 equal to globalPid >> 24). */
static int join_part(Sweep *s, sqlite3 *db, PyObject *part, const Calls *c, Launches *out)
{
    PyObject *query;
    int same_process;
    if (!PyArg_ParseTuple(part, "Op", &query, &same_process)) {
        return PYERROR;
    }
    int failed;
    sqlite3_stmt *stmt = prepare(s, db, query, &failed);
    if (failed || stmt == NULL) {
        return failed ? failed : ROW;
    }
    int rc = SQLITE_DONE, outcome = ROW;
    while (outcome == ROW && (rc = sq.step(stmt)) == SQLITE_ROW) {
        int id_type = sq.column_type(stmt, 0), pid_type = sq.column_type(stmt, 1);
        if (id_type == SQLITE_NULL || (same_process && pid_type == SQLITE_NULL)) {
            continue;
        }
        if (id_type != SQLITE_INTEGER || (same_process && pid_type != SQLITE_INTEGER)) {
            s->unsupported = 1;
            outcome = UNSUPPORTED;
            break;
        }
        int64_t id = sq.column_int64(stmt, 0), process = same_process ? sq.column_int64(stmt, 1) >> 24 : 0;
        Slot *slot = map_find((Map *)&c->last, id, 0, 0);
        Joined work;
        int read = 0;
        for (int32_t i = USED(slot) ? VALUE(slot) : -1; i >= 0; i = c->previous[i]) {
            if (same_process && (c->tid[i] >> 24) != process) {
                continue;
            }
            if (!read) { /* the row's own columns, read once it joins a call (as the SQL reads them) */
                read = 1;
                int device_type = sq.column_type(stmt, 5);
                work.device_null = device_type == SQLITE_NULL;
                work.size_null = sq.column_type(stmt, 7) == SQLITE_NULL;
                work.device = device_type == SQLITE_INTEGER ? sq.column_int64(stmt, 5) : 0;
                if (!work.device_null && device_type != SQLITE_INTEGER) {
                    s->unsupported = 1;
                    outcome = UNSUPPORTED;
                    break;
                }
                if ((outcome = read_launch(s, stmt, &work.w)) != ROW) {
                    break;
                }
            }
            if (out->count == out->capacity && grow(out) < 0) {
                outcome = PYERROR;
                break;
            }
            work.w.global_tid = c->tid[i];
            work.w.at = c->start[i];
            out->items[out->count++] = work;
        }
    }
    return finished(stmt, outcome, rc);
}

/* The launches of `plan` (export.launch_join: the calls' query, then per kind of work its
 * query and whether the call must be of the same process) joined and ordered: ROW, or an
 * outcome. */
int join_launches(Sweep *s, sqlite3 *db, PyObject *plan, Launches *out)
{
    PyObject *calls_query, *parts;
    if (!PyArg_ParseTuple(plan, "OO!", &calls_query, &PyList_Type, &parts)) {
        return PYERROR;
    }
    Calls c;
    memset(&c, 0, sizeof c);
    if (map_init(&c.last, 0, 1024) < 0) {
        PyErr_NoMemory();
        return PYERROR;
    }
    int in_process = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 2) {
            calls_free(&c);
            PyErr_SetString(PyExc_TypeError, "run: a part of the launches' join is not (query, same_process)");
            return PYERROR;
        }
        in_process = in_process && PyObject_IsTrue(PyTuple_GET_ITEM(part, 1)) == 1;
    }
    int outcome = read_calls(s, db, calls_query, in_process, &c);
    for (Py_ssize_t i = 0; outcome == ROW && i < PyList_GET_SIZE(parts); i++) {
        outcome = join_part(s, db, PyList_GET_ITEM(parts, i), &c, out);
    }
    calls_free(&c);
    if (outcome != ROW) {
        return outcome;
    }
    ordering = s;
    qsort(out->items, out->count, sizeof *out->items, by_launch_order);
    out->whole = 1;
    return ROW;
}
