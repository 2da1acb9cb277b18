/* The export's check that its times and ids are integers (export.NsysExport._check_integers) in
 * one pass over a table: SQLite's typeof() per value, as the Python twin asks for it in SQL, costs
 * the query engine a function call and a string comparison each (on the 2-GPU fixture, a report's
 * largest cost after the sweep itself); here it is sqlite3_column_type. */
#include "sweep.h"

#include <string.h>

#define MAX_CHECKED 16

static const char *type_name(int type)
{
    return type == SQLITE_FLOAT ? "real" : type == SQLITE_TEXT ? "text" : "blob";
}

/* Which rows the pass counts: those whose column `kind` holds one of `kinds` and whose column
 * `end` is NULL (the ranges that never ended). */
typedef struct {
    int kind, end, nkinds;
    long long kinds[MAX_CHECKED];
} Counted;

static int counts(sqlite3_stmt *stmt, const Counted *counted)
{
    if (sq.column_type(stmt, counted->end) != SQLITE_NULL || sq.column_type(stmt, counted->kind) != SQLITE_INTEGER) {
        return 0;
    }
    long long kind = sq.column_int64(stmt, counted->kind);
    for (int i = 0; i < counted->nkinds; i++) {
        if (kind == counted->kinds[i]) {
            return 1;
        }
    }
    return 0;
}

/* For each column, the type of its first value (in the table's order) that is neither an
 * integer nor NULL, in types[] (0 where none); with `counted`, the rows it says in *count. The
 * pass ends early once the first column has one: it is the one named (and the count is not
 * read). An SQLite error: SQLERROR. */
static int scan(sqlite3 *db, const char *sql, int columns, const Counted *counted, int *types, long long *count)
{
    sqlite3_stmt *stmt = NULL;
    if (sq.prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        return SQLERROR;
    }
    int rc;
    while ((rc = sq.step(stmt)) == SQLITE_ROW) {
        for (int c = 0; c < columns; c++) {
            int type = sq.column_type(stmt, c);
            if (type != SQLITE_INTEGER && type != SQLITE_NULL && types[c] == 0) {
                types[c] = type;
            }
        }
        if (counted) {
            *count += counts(stmt, counted);
        }
        if (types[0]) {
            rc = SQLITE_DONE;
            break;
        }
    }
    sq.finalize(stmt);
    return rc == SQLITE_DONE ? 0 : SQLERROR;
}

/* `count` parsed: None, or (kind column, end column, kinds); 0, or -1 with a Python error. */
static int parse_counted(PyObject *count, Py_ssize_t columns, Counted *counted)
{
    PyObject *kinds;
    if (!PyArg_ParseTuple(count, "iiO!", &counted->kind, &counted->end, &PyTuple_Type, &kinds)) {
        return -1;
    }
    counted->nkinds = (int)PyTuple_GET_SIZE(kinds);
    if (counted->kind < 0 || counted->kind >= columns || counted->end < 0 || counted->end >= columns ||
        counted->nkinds > MAX_CHECKED) {
        PyErr_SetString(PyExc_ValueError, "wrong_type: count names a column not read, or too many kinds");
        return -1;
    }
    for (int i = 0; i < counted->nkinds; i++) {
        counted->kinds[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(kinds, i));
        if (counted->kinds[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

const char wrong_type_doc[] =
    "wrong_type(uri, sql, columns, count=None) -> (tuple[str, str] | None, int) | NotImplemented\n\n"
    "Runs `sql` (a SELECT of the named `columns`, in order, from one table) and gives the\n"
    "first of them holding a value that is neither an integer nor NULL, with SQLite's name\n"
    "for that value's type (its first such value, in the table's order): what\n"
    "export.NsysExport._check_integers finds by SQL; None where every value is one. Second,\n"
    "with `count` = (kind, end, kinds), column indexes and integers, the number of rows whose\n"
    "`kind` is one of `kinds` and whose `end` is NULL (else 0): the ranges that never ended,\n"
    "counted in the same pass. NotImplemented where SQLite's functions were not found.\n"
    "Raises SQLiteError.";

PyObject *wrong_type(PyObject *module, PyObject *args)
{
    (void)module;
    const char *uri, *sql;
    PyObject *columns;
    PyObject *count_spec = Py_None;
    if (!PyArg_ParseTuple(args, "ssO!|O", &uri, &sql, &PyTuple_Type, &columns, &count_spec)) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(columns);
    if (count < 1 || count > MAX_CHECKED) {
        PyErr_SetString(PyExc_ValueError, "wrong_type: 1 to 16 columns");
        return NULL;
    }
    Counted counted;
    if (count_spec != Py_None && parse_counted(count_spec, count, &counted) < 0) {
        return NULL;
    }
    if (resolve_sqlite() < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    sqlite3 *db = NULL;
    int types[MAX_CHECKED];
    memset(types, 0, sizeof types);
    long long total = 0;
    int failed = open_read_only(uri, &db) || scan(db, sql, (int)count, count_spec == Py_None ? NULL : &counted, types, &total);
    PyObject *result = NULL;
    if (failed) {
        PyErr_SetString(SQLiteError, db ? sq.errmsg(db) : "out of memory");
    } else {
        Py_ssize_t c = 0;
        while (c < count && !types[c]) {
            c++;
        }
        result = c < count ? Py_BuildValue("((Os)L)", PyTuple_GET_ITEM(columns, c), type_name(types[c]), total)
                           : Py_BuildValue("(OL)", Py_None, total);
    }
    if (db) {
        sq.close(db);
    }
    return result;
}
