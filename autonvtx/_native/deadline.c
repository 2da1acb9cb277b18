/*
 * The SIGTERM deadline: a process that took SIGTERM ends within a bounded time.
 *
 * autonvtx answers SIGTERM with a Python-level handler (write the recording, or end through C
 * exit() so that another NVTX tool keeps its events; recorder/shutdown.py, termination.py). A
 * Python handler runs only when the main thread next runs bytecode: a main thread blocked in C
 * (a mutex that is never released, a collective that never completes) never runs it, and the
 * process would outlive the SIGTERM that plain Python would have died of at once. And C exit()
 * runs every library's destructors: one that waits for a lock another thread holds (OpenBLAS
 * joining its threads) hangs the exit itself.
 *
 * So SIGTERM's C-level action is doubled: CPython's handler (it trips the Python one) and, first,
 * a one-shot POSIX timer armed for the grace period. The Python handler disarms it as its first
 * step; if it has not run when the timer fires, the timer's handler ends the process itself:
 * by SIGTERM's default action (the recorder: the watcher writes the outputs from what the
 * process spilled), or, where another tool is attached, through C exit() (its exit hooks keep
 * its events) under a second deadline that ends it with _exit(). Nothing here starts a thread:
 * a thread would make Python 3.12+ warn at each fork.
 *
 * The timer's signal is a real-time signal no one else has a handler for, chosen at install.
 */
#include "nvtxclient.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { END_BY_SIGNAL = 0, END_THROUGH_EXIT = 1 };

static struct sigaction python_action; /* SIGTERM's action when the deadline was installed */
static timer_t deadline_timer;
static int deadline_signal;        /* the timer's real-time signal; 0 while not installed */
static pid_t installed_pid;        /* timers are not inherited by fork children */
static long long grace_ns;
static volatile sig_atomic_t end_mode = END_BY_SIGNAL;
static volatile sig_atomic_t exiting; /* exit() is running: the next deadline ends by _exit() */
static volatile sig_atomic_t exit_status = 128 + SIGTERM;

static void arm(long long ns)
{
    struct itimerspec spec;
    if (deadline_signal == 0 || getpid() != installed_pid)
        return;
    memset(&spec, 0, sizeof spec);
    spec.it_value.tv_sec = (time_t)(ns / 1000000000LL);
    spec.it_value.tv_nsec = (long)(ns % 1000000000LL);
    timer_settime(deadline_timer, 0, &spec, NULL); /* async-signal-safe (POSIX) */
}

static void on_sigterm(int signo, siginfo_t* info, void* context)
{
    int saved = errno;
    arm(grace_ns);
    if (python_action.sa_flags & SA_SIGINFO) {
        if (python_action.sa_sigaction != NULL)
            python_action.sa_sigaction(signo, info, context);
    }
    else if (python_action.sa_handler != SIG_DFL && python_action.sa_handler != SIG_IGN) {
        python_action.sa_handler(signo);
    }
    errno = saved;
}

static void die_by_sigterm(void)
{
    sigset_t set;
    signal(SIGTERM, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), SIGTERM);
    raise(SIGTERM);
    _exit(128 + SIGTERM);
}

static void on_deadline(int signo)
{
    (void)signo;
    if (exiting)
        _exit(exit_status); /* exit() hung in a destructor: the tool's hooks ran before those */
    if (end_mode == END_BY_SIGNAL)
        die_by_sigterm();
    /* Another NVTX tool keeps its events through C exit's hooks: run them (not async-signal-safe,
     * the best there is once Python's handler cannot run), with one more grace period. */
    exiting = 1;
    signal(SIGTERM, SIG_IGN);
    arm(grace_ns);
    exit(exit_status);
}

static int choose_signal(void)
{
    int signo;
    for (signo = SIGRTMAX - 1; signo > SIGRTMIN + 2; --signo) {
        struct sigaction current;
        if (sigaction(signo, NULL, &current) != 0)
            continue;
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL)
            return signo;
    }
    return 0;
}

PyDoc_STRVAR(sigterm_deadline_doc,
"sigterm_deadline(grace, through_exit, /)\n--\n\n"
"After SIGTERM's Python handler is set: if that handler has not started `grace` seconds after\n"
"a SIGTERM, end the process by SIGTERM (or, with `through_exit`, through C exit(143) under a\n"
"second grace period, then _exit). Returns False where it cannot be set up (no free real-time\n"
"signal, or SIGTERM's action is not Python's handler).");

static PyObject* sigterm_deadline(PyObject* module, PyObject* const* args, Py_ssize_t nargs)
{
    double grace;
    int through_exit;
    struct sigaction current, ours;
    struct sigevent event;
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "sigterm_deadline expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    grace = PyFloat_AsDouble(args[0]);
    if (grace == -1.0 && PyErr_Occurred())
        return NULL;
    through_exit = PyObject_IsTrue(args[1]);
    if (through_exit < 0)
        return NULL;
    if (!(grace > 0.0 && grace < 3600.0)) {
        PyErr_SetString(PyExc_ValueError, "sigterm_deadline: grace must be between 0 and 3600 seconds");
        return NULL;
    }
    if (sigaction(SIGTERM, NULL, &current) != 0)
        Py_RETURN_FALSE;
    if (current.sa_sigaction == on_sigterm && (current.sa_flags & SA_SIGINFO)) {
        /* Installed already (in this process or the one it was forked from). */
    }
    else if (!(current.sa_flags & SA_SIGINFO) &&
             (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
        Py_RETURN_FALSE; /* no Python handler to double */
    }
    else {
        python_action = current;
    }
    grace_ns = (long long)(grace * 1e9);
    end_mode = through_exit ? END_THROUGH_EXIT : END_BY_SIGNAL;
    if (deadline_signal == 0 || installed_pid != getpid()) {
        struct sigaction deadline_action;
        int signo = deadline_signal != 0 ? deadline_signal : choose_signal();
        if (signo == 0)
            Py_RETURN_FALSE;
        memset(&deadline_action, 0, sizeof deadline_action);
        deadline_action.sa_handler = on_deadline;
        /* NODEFER: the second deadline must fire while the first one's exit() runs. */
        deadline_action.sa_flags = SA_NODEFER | SA_RESTART;
        sigemptyset(&deadline_action.sa_mask);
        if (sigaction(signo, &deadline_action, NULL) != 0)
            Py_RETURN_FALSE;
        memset(&event, 0, sizeof event);
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = signo;
        if (timer_create(CLOCK_MONOTONIC, &event, &deadline_timer) != 0) {
            signal(signo, SIG_DFL);
            Py_RETURN_FALSE;
        }
        deadline_signal = signo;
        installed_pid = getpid();
    }
    ours = python_action;
    ours.sa_sigaction = on_sigterm;
    ours.sa_flags = python_action.sa_flags | SA_SIGINFO;
    if (sigaction(SIGTERM, &ours, NULL) != 0)
        Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(sigterm_deadline_disarm_doc,
"sigterm_deadline_disarm()\n--\n\n"
"SIGTERM's Python handler has started: the pending deadline, if any, will not fire.");

static PyObject* sigterm_deadline_disarm(PyObject* module, PyObject* unused)
{
    (void)module;
    (void)unused;
    arm(0);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sigterm_deadline_exiting_doc,
"sigterm_deadline_exiting(status, /)\n--\n\n"
"About to call C exit(status): if it has not ended the process within the grace period (a\n"
"destructor waiting for a lock), _exit(status) ends it.");

static PyObject* sigterm_deadline_exiting(PyObject* module, PyObject* status)
{
    long value;
    (void)module;
    value = PyLong_AsLong(status);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    exit_status = (sig_atomic_t)(value & 0xFF);
    exiting = 1;
    arm(grace_ns > 0 ? grace_ns : 2000000000LL);
    Py_RETURN_NONE;
}

static PyMethodDef deadline_methods[] = {
    {"sigterm_deadline", (PyCFunction)(void (*)(void))sigterm_deadline, METH_FASTCALL, sigterm_deadline_doc},
    {"sigterm_deadline_disarm", sigterm_deadline_disarm, METH_NOARGS, sigterm_deadline_disarm_doc},
    {"sigterm_deadline_exiting", sigterm_deadline_exiting, METH_O, sigterm_deadline_exiting_doc},
    {NULL, NULL, 0, NULL},
};

int deadline_add_to_module(PyObject* module)
{
    return PyModule_AddFunctions(module, deadline_methods);
}
