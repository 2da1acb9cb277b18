/*
 * The walk of a module that one rule selects as a whole: what walk.py's ModuleWalk decides
 * and the engine applies, for the common cases, in one C call per module. A package targeted
 * wholesale has thousands of functions in hundreds of modules; walked in Python, each cost
 * several microseconds of deciding and reporting. Two engines apply the decisions here: the
 * code engine (3.12+: a Range attached to the code, its local events on) and the wrap engine
 * (a ranged function wrapper bound where the function was found).
 *
 * walk_uniform(application, items, decisions) goes over a module's (name, value) pairs:
 *
 *   - a plain function defined in the module (for the code engine, whose code is named as
 *     the function): decided (reported wrapped with the rule's reason, protocol dunders
 *     skipped) and applied; a re-export of one the wrap engine wrapped, rebound;
 *   - a class written in Python whose __module__ is the module: its members the same way,
 *     plain functions and static or class methods of plain functions, nested classes too;
 *   - (code engine) functions nested in those, by their co_qualname; properties, builtin
 *     methods and other
 *     callables among members, and builtins the rule leaves out, skipped with their reasons;
 *   - anything else (wrappers, builtins to wrap, a function whose code has another name, C
 *     types): handed to the Python walk's own methods, so every decision the C walk does not
 *     take is taken exactly as before.
 *
 * application, the engine's state: ("code", domain, color, category, tool_id,
 * set_local_events, events, codes, no_existing) from ranges.CodeMonitor.uniform_walker, or
 * ("wrap", domain, color, category, wrapper_type, wrappers, pending, rebind, apply, written)
 * from engines/wrap.py's WrapEngine.uniform_walk.
 * decisions: (module name, reason, wrapped, skipped, classes_seen, kinds, kind_of, dunders,
 * visit_global, visit_member, wrap, failed, builtins, namespace, rebound, remember, MEMBER),
 * the walk's state and methods (walk.py, ModuleWalk.walk): reports are the same lists
 * (walk.ModuleReport), filled the same way.
 */
#ifndef AUTONVTX_UNIFORM_H
#define AUTONVTX_UNIFORM_H

#include "nvtxclient.h"

/* walk.py's kinds of values (_DATA, _CLASS, ...), decided once per type. */
enum { K_DATA, K_CLASS, K_RANGE_WRAPPER, K_FUNCTION, K_BUILTIN, K_STATIC_OR_CLASS, K_PROPERTY,
       K_OTHER_CALLABLE };

typedef struct {
    /* application */
    int wrap_mode;      /* the wrap engine's (else the code engine's) */
    nvtxDomainHandle_t domain;
    PyObject* domain_name;
    unsigned long color;
    unsigned long category;
    PyObject* tool_id;
    int tool;           /* tool_id and events as numbers */
    unsigned long event_bits;
    PyObject* set_local_events;
    PyObject* events;
    PyObject* codes;
    PyObject* pending_range; /* the code engine's PendingRange for this module */
    int no_existing;    /* the engine has no stand-in for any function (no builtin wrapped) */
    PyObject* wrapper_type;
    PyObject* wrappers; /* id(function) -> its wrapper */
    PyObject* pending;  /* id(function) -> names to rebind once it is wrapped */
    PyObject* rebind;
    PyObject* apply;    /* WrapEngine.apply for what ranged_make() leaves (generators early on) */
    PyObject* written;  /* what restore() undoes, or None */
    /* decisions */
    PyObject* name;
    PyObject* reason;
    PyObject* wrapped;  /* the report's list of qualnames wrapped for `reason` */
    PyObject* skipped;  /* the report's list of skips (walk.ModuleReport) */
    PyObject* classes_seen;
    PyObject* kinds;
    PyObject* kind_of;
    PyObject* dunders;
    PyObject* visit_global;
    PyObject* visit_member;
    PyObject* wrap;
    PyObject* failed;
    int builtins;       /* the rule wraps builtins (a wrapper's job: left to Python) */
    PyObject* namespace;
    PyObject* rebound;
    PyObject* remember;
    PyObject* member;   /* walk.MEMBER: marks a class member's skip in `skipped` */
    /* Given NULL (modulepath.c), visit_global ... remember come on first need from
     * callbacks_for(module, namespace, name, report, classes_seen): a tuple of the five,
     * held in `callbacks` (most modules of a package never need them). */
    PyObject* callbacks_for;
    PyObject* module;
    PyObject* report;
    PyObject* callbacks;
} walk_state;

/* The Python walk's methods, by their place in callbacks_for()'s tuple. */
enum { CB_VISIT_GLOBAL, CB_VISIT_MEMBER, CB_WRAP, CB_FAILED, CB_REMEMBER };

/* The walk's Python method `which`(*args), made first where it was not given (modulepath.c):
 * 0, or -1 with the error set. */
int walk_back(walk_state* w, int which, PyObject** args, size_t nargs);

/* Walk a module's `items` with `w`'s decisions filled in, applied as `application` says
 * (uniform.c): 0, or -1 with the error set. */
int uniform_walk_run(walk_state* w, PyObject* application, PyObject* items);

/* The wrap engine's table and writes (wrapping.c): WrapEngine.apply for a plain function named
 * `qualname` (its wrapper, a new reference; None where the engine's own path made it), the
 * wrapper already made for `value` (a new reference, else NULL, an error set on failure), and
 * holder.attr = value, a namespace or a class, remembered for restore(). */
PyObject* wrapping_apply(walk_state* w, PyObject* func, PyObject* qualname);
PyObject* wrapping_existing(walk_state* w, PyObject* value);
int wrapping_put(walk_state* w, PyObject* holder, PyObject* attr, PyObject* value);
int wrapping_ready(void);

/* callable(*args), its result dropped: 0, or -1 with the error set (uniform.c). */
int call_back(PyObject* callable, PyObject** args, size_t nargs);

/* What the code engine's side of the walk reads and reports with (uniform.c): a == b for a
 * str b, getattr(value, name, default), a dunder called implicitly, "<locals>" in a name, a
 * skip reason made once per name (`format` % name, cached in *cache), ModuleReport.skip and
 * its skip as a protocol method. */
int same_str(PyObject* a, PyObject* b);
PyObject* attribute_or(PyObject* value, PyObject* name, PyObject* default_value);
int is_protocol(walk_state* w, PyObject* attr);
int is_local_name(PyObject* qualname);
PyObject* reason_for(PyObject** cache, const char* format, PyObject* name);
int skip(walk_state* w, PyObject* qualname, PyObject* reason);
int skip_protocol(walk_state* w, PyObject* qualname);

#if PY_VERSION_HEX >= 0x030C0000
/* The code engine's ModuleWalk._wrap for a plain function known as `qualname` (monitoring.c):
 * 0, or -1 with the error set. */
int monitoring_walk_function(walk_state* w, PyObject* func, PyObject* qualname);
#endif

#endif
