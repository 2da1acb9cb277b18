/* autonvtx.report._rowtext: an export's per-name table written to a file or a pipe, and its rows
 * sorted, in C. Optional: report/render/text.py and report/views.py keep the Python twins, which
 * run where this module is missing, on a terminal (names cut) and wherever a value is outside
 * what this file handles: every function here returns None or False then, never another text. The figures are those of text.format_duration and of Python's "%.1f" / ",":
 * tests/test_rowtext.py holds each to its Python twin.
 *
 * A per-name report (`report --each`) has tens of thousands of rows of seven cells; Python formats
 * them in about ten times the time this takes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX: a member descriptor's kind */

#include "rowfigures.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELLS 7
#define CELL 32 /* the longest cell: an int64 with separators (26), a share below 2^53 (20) */
#define EXACT (1LL << 53) /* integers below this are exact doubles */
#define TOP_SHOWN 3      /* text._top_line shows this many kernels */

static const char GAP[] = "  ";
static const char UNDER_INDENT[] = "      ";
static const Py_ssize_t RULE_MAX = 40;

/* Interned attribute names. */
static PyObject *s_work, *s_name, *s_domain, *s_span_ns, *s_cpu_ns, *s_instances, *s_top_kernels, *s_kernels,
    *s_kernel_ns, *s_memcpy, *s_memcpy_ns, *s_memset, *s_memset_ns, *s_memcpy_bytes, *s_count, *s_ns, *s_rstrip;

/* ---- growing byte buffer ---------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int reserve(Buffer *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buffer *b, const char *text, size_t len) {
    if (reserve(b, len) < 0)
        return -1;
    memcpy(b->data + b->len, text, len);
    b->len += len;
    return 0;
}

static int put_fill(Buffer *b, char c, size_t count) {
    if (reserve(b, count) < 0)
        return -1;
    memset(b->data + b->len, c, count);
    b->len += count;
    return 0;
}

/* ---- reading rows --------------------------------------------------------------------------- */

/* obj.name (a new reference, or NULL with an error), read straight from the object's slot where
 * its class keeps the attribute in one (`__slots__`, as report.figures' dataclasses do): a
 * read at an offset, not the attribute lookup by name. Where a slot's place is found, per (class,
 * name) the first time: the class's attribute is a plain member descriptor of an object slot, the
 * class reads attributes the default way, and it has not changed since (its version tag). */
typedef struct {
    PyTypeObject *type; /* held: a class freed while cached must not be taken for another */
    PyObject *name;
    unsigned int version;
    Py_ssize_t offset; /* -1: not a slot (read by name) */
} SlotPlace;

#define PLACES 256 /* two ways a (class, name): the few pairs a table reads never evict each other */
static SlotPlace places[PLACES];

static int placed_here(const SlotPlace *place, PyTypeObject *type, PyObject *name) {
    return place->type == type && place->name == name && place->version == type->tp_version_tag;
}

static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    uint64_t h = ((uint64_t)(uintptr_t)type * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)(uintptr_t)name * 0xc2b2ae3d27d4eb4fULL);
    SlotPlace *place = &places[(h >> 56) & (PLACES - 2)];
    int valid = (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) != 0;
    if (valid && placed_here(place, type, name))
        return place->offset;
    if (valid && placed_here(place + 1, type, name))
        return place[1].offset;
    if (place->type != NULL && place[1].type == NULL)
        place++;
    Py_ssize_t offset = -1;
    if (type->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
        if (descr == NULL) {
            PyErr_Clear();
        } else {
            if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
                PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
                if (member->type == T_OBJECT_EX && !(member->flags & READONLY))
                    offset = member->offset; /* a __slots__ entry (read-only members are C-defined) */
            }
            Py_DECREF(descr);
        }
    }
    if (!(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return offset; /* no tag to know it unchanged by: found again next time (the lookup gives one) */
    Py_XSETREF(place->type, (PyTypeObject *)Py_NewRef(type));
    place->name = name;
    place->version = type->tp_version_tag;
    place->offset = offset;
    return offset;
}

static PyObject *attr(PyObject *obj, PyObject *name) {
    Py_ssize_t offset = slot_offset(Py_TYPE(obj), name);
    if (offset >= 0) {
        PyObject *value = *(PyObject **)((char *)obj + offset);
        if (value != NULL)
            return Py_NewRef(value);
    }
    return PyObject_GetAttr(obj, name); /* not a slot, or an empty one (its AttributeError) */
}

/* obj.name as a C integer; 0 with *ok cleared where it is no int or does not fit (or fails). */
static long long int_attr(PyObject *obj, PyObject *name, int *ok) {
    PyObject *value = attr(obj, name);
    if (value == NULL) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    long long result = 0;
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        result = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (result == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            *ok = 0;
        }
    } else {
        *ok = 0;
    }
    Py_DECREF(value);
    return result;
}

/* a + b + c without overflow, or *ok cleared. */
static long long sum3(long long a, long long b, long long c, int *ok) {
    long long ab, abc;
    if (__builtin_add_overflow(a, b, &ab) || __builtin_add_overflow(ab, c, &abc)) {
        *ok = 0;
        return 0;
    }
    return abc;
}

static int is_control(char c) {
    return (unsigned char)c < 0x20 || c == 0x7f;
}

/* Whether an ASCII text holds a control character (below 0x20, or 0x7f): eight bytes a step.
 * In a word of ASCII bytes (high bits clear), a byte's high bit is set by adding 0x60 exactly
 * where it is at least 0x20, and by adding 0x01 exactly where it is 0x7f. */
static int has_control(const char *text, Py_ssize_t len) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        memcpy(&word, text + i, 8);
        if ((~(word + 0x60 * ones) | (word + ones)) & highs)
            return 1;
    }
    for (; i < len; i++)
        if (is_control(text[i]))
            return 1;
    return 0;
}

static const char HEX[] = "0123456789abcdef";

/* An ASCII text copied to `out` with each control character as \xNN; returns the end. */
static char *escaped(char *out, const char *text, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (is_control((char)c)) {
            *out++ = '\\';
            *out++ = 'x';
            *out++ = HEX[c >> 4];
            *out++ = HEX[c & 15];
        } else {
            *out++ = (char)c;
        }
    }
    return out;
}

/* An ASCII text with each control character as \xNN (text.printable). */
static int put_printable(Buffer *b, const char *text, Py_ssize_t len) {
    if (reserve(b, (size_t)len * 4) < 0)
        return -1;
    if (!has_control(text, len)) {
        memcpy(b->data + b->len, text, (size_t)len);
        b->len += (size_t)len;
        return 0;
    }
    b->len = (size_t)(escaped(b->data + b->len, text, len) - b->data);
    return 0;
}

/* A str written as UTF-8; -2 (no exception) where it has no UTF-8 form (a lone surrogate). */
static int put_str(Buffer *b, PyObject *text) {
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (utf8 == NULL) {
        PyErr_Clear();
        return -2;
    }
    return put(b, utf8, (size_t)len);
}

/* The Python twin's answer for an object: `function(args...)` must give an exact str. */
static PyObject *call_for_str(PyObject *function, PyObject *a, PyObject *b) {
    PyObject *result = b ? PyObject_CallFunctionObjArgs(function, a, b, NULL)
                         : PyObject_CallFunctionObjArgs(function, a, NULL);
    if (result != NULL && !PyUnicode_CheckExact(result)) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_TypeError, "_rowtext: the Python twin gave no str");
        return NULL;
    }
    return result;
}

/* ---- gpu_table -------------------------------------------------------------------------- */

/* A row read: its text in the arena (cells, then its name, then its top-kernel line), so that
 * the second pass, which aligns the cells, reads memory in order instead of the rows again. */
typedef struct {
    size_t at;
    unsigned char lens[CELLS];
    size_t name_len; /* bytes */
    size_t top_len;  /* bytes; 0: no line under the row */
} Prepared;

/* The row's name as text._gpu_lines shows it, `domain:name` (or the bare name; "(unnamed)")
 * with control characters escaped, appended to `arena`: ASCII here, anything else through
 * `shown` (and Python's rstrip, which knows Unicode's spaces). *points: its length in code
 * points (the rule's length). -1 on failure; *ok cleared where it is not this file's to write. */
static int put_name(Buffer *arena, PyObject *row, PyObject *shown, Py_ssize_t *points, int *ok) {
    PyObject *domain = attr(row, s_domain);
    if (domain == NULL)
        return -1;
    PyObject *name = attr(row, s_name);
    if (name == NULL) {
        Py_DECREF(domain);
        return -1;
    }
    int result = 0;
    size_t start = arena->len;
    if (!PyUnicode_CheckExact(domain) || !PyUnicode_CheckExact(name)) {
        *ok = 0;
    } else if (PyUnicode_IS_ASCII(domain) && PyUnicode_IS_ASCII(name)) {
        Py_ssize_t dlen = PyUnicode_GET_LENGTH(domain), nlen = PyUnicode_GET_LENGTH(name);
        const char *ntext = (const char *)PyUnicode_DATA(name);
        if (nlen == 0) {
            ntext = "(unnamed)";
            nlen = 9;
        }
        if (dlen)
            result = put_printable(arena, (const char *)PyUnicode_DATA(domain), dlen) < 0 || put(arena, ":", 1) < 0
                         ? -1
                         : 0;
        if (result == 0)
            result = put_printable(arena, ntext, nlen);
        *points = (Py_ssize_t)(arena->len - start);
    } else {
        PyObject *text = call_for_str(shown, domain, name);
        PyObject *stripped = text == NULL ? NULL : PyObject_CallMethodNoArgs(text, s_rstrip);
        if (stripped == NULL) {
            result = -1;
        } else {
            *points = PyUnicode_GET_LENGTH(text);
            result = put_str(arena, stripped);
            if (result == -2) {
                *ok = 0;
                result = 0;
            }
        }
        Py_XDECREF(text);
        Py_XDECREF(stripped);
    }
    Py_DECREF(domain);
    Py_DECREF(name);
    return result;
}

/* The line under a row naming its top kernels (text._top_line), "top: ..." appended to `arena`;
 * nothing where there is none. -1 on failure; *ok cleared where it is not this file's to write. */
static int put_top_line(Buffer *arena, PyObject *row, long long kernel_ns, PyObject *printable, int *ok) {
    PyObject *top = attr(row, s_top_kernels);
    if (top == NULL)
        return -1;
    int result = 0;
    if (!PyList_CheckExact(top)) {
        *ok = 0;
        goto done;
    }
    Py_ssize_t count = PyList_GET_SIZE(top);
    if (count == 0 || kernel_ns == 0)
        goto done;
    if (kernel_ns >= EXACT || kernel_ns <= -EXACT) {
        *ok = 0;
        goto done;
    }
    if (put(arena, "top: ", 5) < 0) {
        result = -1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < count && i < TOP_SHOWN && *ok; i++) {
        PyObject *kernel = PyList_GET_ITEM(top, i);
        long long ns = int_attr(kernel, s_ns, ok), launches = int_attr(kernel, s_count, ok);
        if (!*ok)
            break;
        if (ns >= EXACT / 100 || ns <= -EXACT / 100) {
            *ok = 0;
            break;
        }
        /* 100 * ns / kernel_ns: Python divides the exact integers, rounding once; so does this
         * where both are exact doubles. */
        char figure[CELL];
        int n = 0;
        if (i) {
            memcpy(figure, ", ", 2);
            n = 2;
        }
        int digits = share_digits(figure + n, ns, kernel_ns, 0);
        if (digits >= 0) {
            n += digits;
            memcpy(figure + n, "% ", 3);
            n += 2;
        } else {
            n = snprintf(figure, sizeof figure, "%s%.0f%% ", i ? ", " : "", (double)(100 * ns) / (double)kernel_ns);
        }
        if (n < 0 || n >= (int)sizeof figure) {
            *ok = 0;
            break;
        }
        if (put(arena, figure, (size_t)n) < 0) {
            result = -1;
            break;
        }
        PyObject *name = attr(kernel, s_name);
        if (name == NULL) {
            result = -1;
            break;
        }
        int written;
        if (!PyUnicode_CheckExact(name)) {
            *ok = 0;
            written = 0;
        } else if (PyUnicode_IS_ASCII(name)) {
            written = put_printable(arena, (const char *)PyUnicode_DATA(name), PyUnicode_GET_LENGTH(name));
        } else {
            PyObject *safe = call_for_str(printable, name, NULL);
            written = safe == NULL ? -1 : put_str(arena, safe);
            Py_XDECREF(safe);
            if (written == -2) {
                *ok = 0;
                written = 0;
            }
        }
        Py_DECREF(name);
        if (written < 0) {
            result = -1;
            break;
        }
        char launched[40] = " (x";
        n = 3 + grouped(launched + 3, launches);
        launched[n++] = ')';
        if (put(arena, launched, (size_t)n) < 0) {
            result = -1;
            break;
        }
    }
done:
    Py_DECREF(top);
    return result;
}

/* Reads one row into `arena` (see Prepared). -1 on failure; *ok cleared where a value is not
 * this file's to write. */
static int prepare(Prepared *p, Buffer *arena, PyObject *row, long long total, PyObject *shown,
                   PyObject *printable, Py_ssize_t *points, int *ok) {
    PyObject *work = attr(row, s_work);
    if (work == NULL) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    long long kernel_ns = int_attr(work, s_kernel_ns, ok);
    long long gpu_ns = sum3(kernel_ns, int_attr(work, s_memcpy_ns, ok), int_attr(work, s_memset_ns, ok), ok);
    long long kernels = int_attr(work, s_kernels, ok);
    long long memcpy_ = int_attr(work, s_memcpy, ok), memset_ = int_attr(work, s_memset, ok);
    Py_DECREF(work);
    long long operations = sum3(memcpy_, memset_, 0, ok);
    long long span_ns = int_attr(row, s_span_ns, ok), cpu_ns = int_attr(row, s_cpu_ns, ok);
    long long instances = int_attr(row, s_instances, ok);
    if (!*ok)
        return 0;
    if (reserve(arena, CELLS * CELL) < 0)
        return -1;
    p->at = arena->len;
    char *out = arena->data + arena->len;
    int n[CELLS];
    n[0] = duration(out, CELL, gpu_ns);
    if (gpu_ns && total) {
        /* 100 * gpu_ns / total: Python divides the exact integers, rounding once; so does this
         * where both are exact doubles. */
        if (gpu_ns >= EXACT / 100 || gpu_ns <= -EXACT / 100 || total >= EXACT || total <= -EXACT) {
            *ok = 0;
            return 0;
        }
        n[1] = share_digits(out + n[0], gpu_ns, total, 1);
        if (n[1] >= 0)
            memcpy(out + n[0] + n[1]++, "%", 2);
        else
            n[1] = snprintf(out + n[0], CELL, "%.1f%%", (double)(100 * gpu_ns) / (double)total);
    } else {
        memcpy(out + n[0], "0.0%", 5);
        n[1] = 4;
    }
    char *cell = out + n[0] + n[1];
    cell += n[2] = grouped(cell, kernels);
    cell += n[3] = grouped(cell, operations);
    cell += n[4] = duration(cell, CELL, span_ns);
    cell += n[5] = duration(cell, CELL, cpu_ns);
    cell += n[6] = grouped(cell, instances);
    for (int i = 0; i < CELLS; i++) {
        if (n[i] < 0 || n[i] >= CELL) {
            *ok = 0;
            return 0;
        }
        p->lens[i] = (unsigned char)n[i];
    }
    arena->len = (size_t)(cell - arena->data);
    size_t at = arena->len;
    if (put_name(arena, row, shown, points, ok) < 0)
        return -1;
    p->name_len = arena->len - at;
    at = arena->len;
    if (*ok && put_top_line(arena, row, kernel_ns, printable, ok) < 0)
        return -1;
    p->top_len = arena->len - at;
    return 0;
}

typedef struct {
    PyObject *row;
    Py_ssize_t index;
} Placed;

static int by_address(const void *left, const void *right) {
    uintptr_t a = (uintptr_t)((const Placed *)left)->row, b = (uintptr_t)((const Placed *)right)->row;
    return a < b ? -1 : a > b;
}

static int put_aligned(Buffer *b, const char *cell, size_t len, size_t width) {
    return put_fill(b, ' ', width - len) < 0 || put(b, cell, len) < 0 ? -1 : 0;
}

PyDoc_STRVAR(gpu_table_doc,
             "gpu_table(rows, total_gpu_ns, headers, shown, printable) -> str | None\n\n"
             "The text of text._gpu_table(report, text._gpu_lines(report, rows), None): the header,\n"
             "the rule and each row with its top-kernel line, joined by newlines (no final one). None\n"
             "where a row holds a value this function does not handle: the caller's Python path\n"
             "writes those. `shown(domain, name)` and `printable(text)` name what is not ASCII.");

static PyObject *gpu_table(PyObject *module, PyObject *args) {
    PyObject *rows, *headers, *shown, *printable;
    long long total;
    if (!PyArg_ParseTuple(args, "O!LO!OO", &PyList_Type, &rows, &total, &PyTuple_Type, &headers, &shown, &printable))
        return NULL;
    if (PyTuple_GET_SIZE(headers) != CELLS)
        Py_RETURN_NONE;
    size_t widths[CELLS];
    const char *header_text[CELLS];
    for (int i = 0; i < CELLS; i++) {
        PyObject *header = PyTuple_GET_ITEM(headers, i);
        if (!PyUnicode_CheckExact(header) || !PyUnicode_IS_ASCII(header))
            Py_RETURN_NONE;
        header_text[i] = (const char *)PyUnicode_DATA(header);
        widths[i] = (size_t)PyUnicode_GET_LENGTH(header);
    }
    /* Our own reference to the rows: a callback (shown, printable) cannot free one meanwhile. */
    PyObject *held = PyList_GetSlice(rows, 0, PyList_GET_SIZE(rows));
    if (held == NULL)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(held);
    Prepared *prepared = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Prepared));
    PyObject *result = NULL;
    Placed *order = NULL;
    Buffer arena = {NULL, 0, 0}, b = {NULL, 0, 0};
    int ok = 1;
    if (prepared == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    /* The rows are read in the order they lie in memory, not in the table's: a sorted table
     * visits them (and their Work and figures, made beside them) at random, a cache miss each. */
    order = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Placed));
    if (order == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        order[r].row = PyList_GET_ITEM(held, r);
        order[r].index = r;
    }
    qsort(order, (size_t)count, sizeof(Placed), by_address);
    Py_ssize_t longest = 5; /* len("Range") */
    for (Py_ssize_t o = 0; o < count; o++) {
        Prepared *p = &prepared[order[o].index];
        Py_ssize_t points = 0;
        if (prepare(p, &arena, order[o].row, total, shown, printable, &points, &ok) < 0)
            goto out;
        if (!ok)
            goto unhandled;
        for (int i = 0; i < CELLS; i++)
            if (p->lens[i] > widths[i])
                widths[i] = p->lens[i];
        if (points > longest)
            longest = points;
    }
    size_t line = 0;
    for (int i = 0; i < CELLS; i++)
        line += widths[i] + 2;
    if (reserve(&b, arena.len + (size_t)count * (line + 2 + sizeof UNDER_INDENT) + 2 * line + 64) < 0)
        goto out;
    /* The header and the rule, then the rows. */
    for (int i = 0; i < CELLS; i++) {
        if (put_aligned(&b, header_text[i], strlen(header_text[i]), widths[i]) < 0 || put(&b, GAP, 2) < 0)
            goto out;
    }
    if (put(&b, "Range\n", 6) < 0)
        goto out;
    for (int i = 0; i < CELLS; i++) {
        if (put_fill(&b, '-', widths[i]) < 0 || put(&b, GAP, 2) < 0)
            goto out;
    }
    if (put_fill(&b, '-', (size_t)(longest < RULE_MAX ? longest : RULE_MAX)) < 0)
        goto out;
    /* The rows, into the room reserved above (each at most its text in the arena, a line of
     * cells with their gaps, two newlines and the indent): written in place, without a check
     * per piece. */
    char *o = b.data + b.len;
    for (Py_ssize_t r = 0; r < count; r++) {
        Prepared *p = &prepared[r];
        const char *text = arena.data + p->at;
        *o++ = '\n';
        char *start = o;
        for (int i = 0; i < CELLS; i++) {
            size_t len = p->lens[i];
            for (size_t pad = widths[i] - len; pad; pad--)
                *o++ = ' ';
            for (size_t k = 0; k < len; k++) /* a cell: at most CELL bytes */
                *o++ = *text++;
            *o++ = ' ';
            *o++ = ' ';
        }
        memcpy(o, text, p->name_len);
        o += p->name_len;
        /* Python's rstrip: the only space an ASCII line can end with is ' ' (the other ASCII
         * spaces are control characters, escaped); a name that is not ASCII came stripped. */
        while (o > start && o[-1] == ' ')
            o--;
        if (p->top_len) {
            *o++ = '\n';
            memcpy(o, UNDER_INDENT, sizeof UNDER_INDENT - 1);
            o += sizeof UNDER_INDENT - 1;
            memcpy(o, text + p->name_len, p->top_len);
            o += p->top_len;
        }
    }
    b.len = (size_t)(o - b.data);
    result = PyUnicode_DecodeUTF8(b.data, (Py_ssize_t)b.len, "strict");
    goto out;
unhandled:
    result = Py_NewRef(Py_None);
out:
    PyMem_Free(order);
    PyMem_Free(prepared);
    PyMem_Free(arena.data);
    PyMem_Free(b.data);
    Py_DECREF(held);
    return result;
}

/* ---- sort_rows -------------------------------------------------------------------------- */

typedef struct {
    long long first, cpu;
    PyObject *name, *domain, *row;
    Py_ssize_t index;
} SortItem;

static int compare_items(const void *left, const void *right) {
    const SortItem *a = left, *b = right;
    if (a->first != b->first)
        return a->first > b->first ? -1 : 1; /* largest first */
    if (a->cpu != b->cpu)
        return a->cpu > b->cpu ? -1 : 1;
    int order = PyUnicode_Compare(a->name, b->name);
    if (order == 0)
        order = PyUnicode_Compare(a->domain, b->domain);
    if (order == 0)
        return a->index < b->index ? -1 : a->index > b->index; /* list.sort is stable */
    return order;
}

PyDoc_STRVAR(sort_rows_doc,
             "sort_rows(rows, field) -> bool\n\n"
             "Sorts a list of report rows in place as views.export_order(field) orders them:\n"
             "the field's value largest first, then CPU time largest first, then name, then domain\n"
             "(equal rows keep their order). `field`: gpu, cpu, kernels, instances, span or memcpy.\n"
             "False, the list untouched, where a row holds a value this function does not handle.");

static PyObject *sort_rows(PyObject *module, PyObject *args) {
    PyObject *rows;
    const char *field;
    if (!PyArg_ParseTuple(args, "O!s", &PyList_Type, &rows, &field))
        return NULL;
    enum { GPU, CPU, KERNELS, INSTANCES, SPAN, MEMCPY } which;
    if (strcmp(field, "gpu") == 0)
        which = GPU;
    else if (strcmp(field, "cpu") == 0)
        which = CPU;
    else if (strcmp(field, "kernels") == 0)
        which = KERNELS;
    else if (strcmp(field, "instances") == 0)
        which = INSTANCES;
    else if (strcmp(field, "span") == 0)
        which = SPAN;
    else if (strcmp(field, "memcpy") == 0)
        which = MEMCPY;
    else
        Py_RETURN_FALSE;
    Py_ssize_t count = PyList_GET_SIZE(rows);
    SortItem *items = PyMem_Calloc((size_t)(count ? count : 1), sizeof(SortItem));
    if (items == NULL)
        return PyErr_NoMemory();
    PyObject *held = PyList_GetSlice(rows, 0, count);
    PyObject *result = NULL;
    Py_ssize_t done = 0;
    int ok = 1;
    if (held == NULL)
        goto out;
    for (; done < count && ok; done++) {
        SortItem *item = &items[done];
        PyObject *row = PyList_GET_ITEM(held, done);
        item->row = row;
        item->index = done;
        item->cpu = int_attr(row, s_cpu_ns, &ok);
        if (which == GPU || which == KERNELS || which == MEMCPY) {
            PyObject *work = attr(row, s_work);
            if (work == NULL) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            if (which == GPU)
                item->first = sum3(int_attr(work, s_kernel_ns, &ok), int_attr(work, s_memcpy_ns, &ok),
                                   int_attr(work, s_memset_ns, &ok), &ok);
            else
                item->first = int_attr(work, which == KERNELS ? s_kernels : s_memcpy_bytes, &ok);
            Py_DECREF(work);
        } else if (which == CPU) {
            item->first = item->cpu;
        } else {
            item->first = int_attr(row, which == INSTANCES ? s_instances : s_span_ns, &ok);
        }
        item->name = attr(row, s_name);
        item->domain = attr(row, s_domain);
        if (item->name == NULL || item->domain == NULL) {
            PyErr_Clear();
            ok = 0;
            done++;
            break;
        }
        if (!PyUnicode_CheckExact(item->name) || !PyUnicode_CheckExact(item->domain))
            ok = 0;
    }
    if (!ok) {
        result = Py_NewRef(Py_False);
        goto out;
    }
    qsort(items, (size_t)count, sizeof(SortItem), compare_items);
    if (PyList_GET_SIZE(rows) != count) { /* changed by a row's attribute: leave it */
        result = Py_NewRef(Py_False);
        goto out;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = Py_NewRef(items[i].row);
        PyList_SetItem(rows, i, row); /* steals; drops the list's old reference (held keeps it) */
    }
    result = Py_NewRef(Py_True);
out:
    for (Py_ssize_t i = 0; i < done; i++) {
        Py_XDECREF(items[i].name);
        Py_XDECREF(items[i].domain);
    }
    PyMem_Free(items);
    Py_XDECREF(held);
    return result;
}

PyDoc_STRVAR(format_duration_doc,
             "format_duration(ns) -> str | None\n\n"
             "text.format_duration's text for an int, as the table writes it; None where it is\n"
             "outside the int64 range (the test holds it to the Python twin).");

static PyObject *format_duration(PyObject *module, PyObject *value) {
    if (!PyLong_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "format_duration: an int is expected");
        return NULL;
    }
    int overflow = 0;
    long long ns = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (ns == -1 && PyErr_Occurred())
        return NULL;
    if (overflow)
        Py_RETURN_NONE;
    char out[CELL];
    int n = duration(out, sizeof out, ns);
    if (n < 0 || n >= CELL)
        Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(out, n);
}

static PyMethodDef methods[] = {
    {"format_duration", format_duration, METH_O, format_duration_doc},
    {"gpu_table", gpu_table, METH_VARARGS, gpu_table_doc},
    {"sort_rows", sort_rows, METH_VARARGS, sort_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "autonvtx.report._rowtext",
    "An export's per-name table and its sort in C (the Python twins: report.render.text, report.views).", -1, methods,
};

#define INTERN(var, text)                                                                                             \
    do {                                                                                                              \
        if ((var = PyUnicode_InternFromString(text)) == NULL)                                                         \
            return NULL;                                                                                              \
    } while (0)

PyMODINIT_FUNC PyInit__rowtext(void) {
    INTERN(s_work, "work");
    INTERN(s_name, "name");
    INTERN(s_domain, "domain");
    INTERN(s_span_ns, "span_ns");
    INTERN(s_cpu_ns, "cpu_ns");
    INTERN(s_instances, "instances");
    INTERN(s_top_kernels, "top_kernels");
    INTERN(s_kernels, "kernels");
    INTERN(s_kernel_ns, "kernel_ns");
    INTERN(s_memcpy, "memcpy");
    INTERN(s_memcpy_ns, "memcpy_ns");
    INTERN(s_memset, "memset");
    INTERN(s_memset_ns, "memset_ns");
    INTERN(s_memcpy_bytes, "memcpy_bytes");
    INTERN(s_count, "count");
    INTERN(s_ns, "ns");
    INTERN(s_rstrip, "rstrip");
    return PyModule_Create(&module_def);
}
