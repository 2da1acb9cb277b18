/* The native sweep's reading: SQLite's functions found where Python's _sqlite3 module has them
 * (dlopen of the module with RTLD_NOLOAD, dlsym: a handle's lookup covers the libraries it
 * depends on), the queries prepared, and each row's values as the Python sweep reads them. */
#include "sweep.h"

#include <dlfcn.h>
#include <stdio.h>

/* The functions found (all, or `missing` says which not). */
SQLiteApi sq;

/* Finds SQLite's functions where Python's _sqlite3 module has them: 0, or -1 with sq.missing. */
int resolve_sqlite(void)
{
    if (sq.resolved) {
        return sq.resolved > 0 ? 0 : -1;
    }
    sq.resolved = -1;
    PyObject *module = PyImport_ImportModule("_sqlite3");
    if (module == NULL) {
        PyErr_Clear();
        snprintf(sq.missing, sizeof sq.missing, "Python's _sqlite3 module does not import");
        return -1;
    }
    PyObject *file = PyObject_GetAttrString(module, "__file__");
    Py_DECREF(module);
    void *handle = NULL;
    if (file == NULL) {
        PyErr_Clear();  /* built into the interpreter: its symbols are the program's */
        handle = dlopen(NULL, RTLD_NOW);
    } else {
        const char *path = PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : NULL;
        if (path == NULL) {
            PyErr_Clear();
        } else {
            handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        }
        Py_DECREF(file);
    }
    if (handle == NULL) {
        snprintf(sq.missing, sizeof sq.missing, "Python's _sqlite3 module is not a loaded shared object");
        return -1;
    }
    struct {
        const char *name;
        void **slot;
    } wanted[] = {
        {"sqlite3_open_v2", (void **)&sq.open_v2},
        {"sqlite3_close", (void **)&sq.close},
        {"sqlite3_prepare_v2", (void **)&sq.prepare_v2},
        {"sqlite3_bind_int64", (void **)&sq.bind_int64},
        {"sqlite3_step", (void **)&sq.step},
        {"sqlite3_column_type", (void **)&sq.column_type},
        {"sqlite3_column_int64", (void **)&sq.column_int64},
        {"sqlite3_column_text", (void **)&sq.column_text},
        {"sqlite3_column_bytes", (void **)&sq.column_bytes},
        {"sqlite3_finalize", (void **)&sq.finalize},
        {"sqlite3_errmsg", (void **)&sq.errmsg},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        *wanted[i].slot = dlsym(handle, wanted[i].name);
        if (*wanted[i].slot == NULL) {
            snprintf(sq.missing, sizeof sq.missing,
                     "%s is not visible through Python's _sqlite3 module (SQLite linked into it statically?)",
                     wanted[i].name);
            return -1;
        }
    }
    /* The handle stays open: _sqlite3 is never unloaded, and the pointers must stay valid. */
    sq.resolved = 1;
    return 0;
}



/* The export opened read-only (`query_only`: nothing can write to it): 0, or SQLERROR with *db
 * holding the connection's message (or NULL: out of memory). */
int open_read_only(const char *uri, sqlite3 **db)
{
    if (sq.open_v2(uri, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                   NULL) != SQLITE_OK) {
        return SQLERROR;
    }
    sqlite3_stmt *pragma = NULL;
    if (sq.prepare_v2(*db, "PRAGMA query_only = 1", -1, &pragma, NULL) != SQLITE_OK) {
        return SQLERROR;
    }
    int rc = sq.step(pragma);
    sq.finalize(pragma);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : SQLERROR;
}

int32_t text_column(Sweep *s, sqlite3_stmt *stmt, int column, int32_t *raw)
{
    int type = sq.column_type(stmt, column);
    if (type == SQLITE_NULL) {
        *raw = NONE;
        return NONE;
    }
    if (type != SQLITE_TEXT) {
        return NOT_TEXT;
    }
    const unsigned char *text = sq.column_text(stmt, column);
    int length = sq.column_bytes(stmt, column);
    if (text == NULL && length == 0) {
        text = (const unsigned char *)"";
    } else if (text == NULL) {
        PyErr_NoMemory();
        return TEXT_ERROR;
    }
    *raw = raw_text(s, (const char *)text, (size_t)length);
    return *raw < 0 ? TEXT_ERROR : s->raw_sid[*raw];
}

/* A launch's work from its columns 2-7 (kind, start, end, device, name, bytes: the same places
 * in the ordered query and in a kind's query of the join): ROW, or an outcome. */
int read_launch(Sweep *s, sqlite3_stmt *stmt, Launch *w)
{
    int64_t size = 0;
    int size_type = sq.column_type(stmt, 7);
    if (integer(stmt, 2, &w->kind) || integer(stmt, 3, &w->gpu_start) || integer(stmt, 4, &w->gpu_end) ||
        w->kind < 0 || w->kind > 2 || (size_type != SQLITE_NULL && integer(stmt, 7, &size))) {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    w->size = size;  /* `size or 0` */
    int kernel_type = sq.column_type(stmt, 6);
    if (kernel_type == SQLITE_INTEGER) {
        w->kernel_tag = 0;
        w->kernel = sq.column_int64(stmt, 6);
    } else if (kernel_type == SQLITE_NULL) {
        w->kernel_tag = 2;
        w->kernel = 0;
    } else if (kernel_type == SQLITE_TEXT) {
        int32_t raw;
        int32_t sid = text_column(s, stmt, 6, &raw);
        if (sid == TEXT_ERROR) {
            return PYERROR;
        }
        w->kernel_tag = 1;
        w->kernel_raw = raw;
        w->kernel = sid;
    } else {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    return ROW;
}

int next_launch(Sweep *s, Launches *from, Launch *w)
{
    if (from->whole) {
        if (from->next == from->count) {
            return END;
        }
        *w = from->items[from->next++].w;
        return ROW;
    }
    if (from->stmt == NULL || from->done) {
        return END;
    }
    int rc = sq.step(from->stmt);
    if (rc == SQLITE_DONE) {
        from->done = 1;  /* stepped again, a finished statement would start over */
        return END;
    }
    if (rc != SQLITE_ROW) {
        return SQLERROR;
    }
    if (integer(from->stmt, 0, &w->global_tid) || integer(from->stmt, 1, &w->at)) {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    return read_launch(s, from->stmt, w);
}

/* A range from the ranges' query (globalTid, start, end, is start/end, domain, name): ROW, or an
 * outcome. */
int read_range(Sweep *s, sqlite3_stmt *stmt, Range *r)
{
    int64_t start_end;
    if (integer(stmt, 0, &r->global_tid) || integer(stmt, 1, &r->start) || integer(stmt, 2, &r->end) ||
        integer(stmt, 3, &start_end) || integer(stmt, 4, &r->domain)) {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    r->start_end = start_end != 0;
    r->sid = text_column(s, stmt, 5, &r->raw);
    if (r->sid == TEXT_ERROR) {
        return PYERROR;
    }
    if (r->sid == NOT_TEXT) {
        s->unsupported = 1;
        return UNSUPPORTED;
    }
    if (s->renumbered.count) {
        Slot *slot = map_find(&s->renumbered, r->global_tid & ~(int64_t)0xFFFFFF, r->domain, 0);
        if (USED(slot)) {
            r->domain = s->renumbered_keys[VALUE(slot)];
        }
    }
    return ROW;
}

int next_range(Sweep *s, Ranges *from, Range *r)
{
    if (from->whole) {
        if (from->next == from->count) {
            return END;
        }
        *r = from->items[from->next++];
        return ROW;
    }
    if (from->stmt == NULL || from->done) {
        return END;
    }
    int rc = from->stepped ? sq.step(from->stmt) : from->first;
    from->stepped = 1;
    if (rc == SQLITE_DONE) {
        from->done = 1;
        return END;
    }
    if (rc != SQLITE_ROW) {
        return SQLERROR;
    }
    return read_range(s, from->stmt, r);
}

/* The statement of (sql, args): NULL with the connection's message on failure (or
 * s->unsupported for an argument that is not an integer). */
sqlite3_stmt *prepare(Sweep *s, sqlite3 *db, PyObject *query, int *failed)
{
    *failed = 0;
    if (query == Py_None) {
        return NULL;
    }
    PyObject *sql_object, *args;
    if (!PyArg_ParseTuple(query, "UO!", &sql_object, &PyTuple_Type, &args)) {
        *failed = PYERROR;
        return NULL;
    }
    Py_ssize_t length;
    const char *sql = PyUnicode_AsUTF8AndSize(sql_object, &length);
    if (sql == NULL) {
        *failed = PYERROR;
        return NULL;
    }
    sqlite3_stmt *stmt = NULL;
    if (sq.prepare_v2(db, sql, (int)length + 1, &stmt, NULL) != SQLITE_OK) {
        *failed = SQLERROR;
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *arg = PyTuple_GET_ITEM(args, i);
        int overflow = 0;
        long long value = PyLong_CheckExact(arg) ? PyLong_AsLongLongAndOverflow(arg, &overflow) : 0;
        if (!PyLong_CheckExact(arg) || overflow || (value == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            sq.finalize(stmt);
            s->unsupported = 1;
            *failed = UNSUPPORTED;
            return NULL;
        }
        if (sq.bind_int64(stmt, (int)i + 1, value) != SQLITE_OK) {
            sq.finalize(stmt);
            *failed = SQLERROR;
            return NULL;
        }
    }
    return stmt;
}

