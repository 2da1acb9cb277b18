/* The native sweep's walk over ranges (by start) and launches (by call start), each function
 * its namesake in report/nsys/sweep.py. */
#include "sweep.h"

/* ---- the sweep (each function is its namesake in sweep.py) */

static void finish(Sweep *s, const Instance *instance, Instance *parent)
{
    if (!instance->has_work && s->only_with_work) {
        return;
    }
    int64_t *totals = &s->totals[(size_t)instance->node * NTOTALS];
    add(s, &totals[INSTANCES], 1);
    add(s, &totals[CPU_NS], difference(s, instance->end, instance->start));
    if (!instance->has_work) {
        return;
    }
    add(s, &totals[SPAN_NS], difference(s, instance->gmax, instance->gmin));
    for (int i = 0; i < NWORK; i++) {
        add(s, &totals[WORK + i], instance->work[i]);
    }
    if (parent == NULL) {
        return;
    }
    if (instance->end > parent->end) {
        s->misnested++;
    }
    if (!parent->has_work) {
        parent->has_work = 1;
        parent->gmin = instance->gmin;
        parent->gmax = instance->gmax;
        memcpy(parent->work, instance->work, sizeof parent->work);
        return;
    }
    for (int i = 0; i < NWORK; i++) {
        add(s, &parent->work[i], instance->work[i]);
    }
    if (instance->gmin < parent->gmin) {
        parent->gmin = instance->gmin;
    }
    if (instance->gmax > parent->gmax) {
        parent->gmax = instance->gmax;
    }
}

static int pop(Sweep *s, int32_t index)
{
    Thread *thread = &s->threads[index];
    Instance instance = thread->stack.items[--thread->stack.count];
    if (names_add(s, index, s->key[instance.node], -1) < 0) {
        return -1;
    }
    finish(s, &instance, thread->stack.count ? &thread->stack.items[thread->stack.count - 1] : NULL);
    return 0;
}

static int outside(Sweep *s, Thread *thread, const Launch *w, int64_t duration)
{
    int32_t at = s->group_outside[thread->group];
    if (at < 0) {
        GROW(s->outside, s->noutside, s->outside_capacity, {
            PyErr_NoMemory();
            return -1;
        });
        at = s->group_outside[thread->group] = (int32_t)s->noutside++;
        s->outside[at].group = thread->group;
        memset(s->outside[at].work, 0, sizeof s->outside[at].work);
    }
    add_work(s, s->outside[at].work, (int)w->kind, duration, w->size);
    return 0;
}

static int credit(Sweep *s, Instance *instance, const Launch *w, int64_t duration, int top_kernel)
{
    if (!instance->has_work) {
        instance->has_work = 1;
        instance->gmin = w->gpu_start;
        instance->gmax = w->gpu_end;
        memset(instance->work, 0, sizeof instance->work);
    } else {
        if (w->gpu_start < instance->gmin) {
            instance->gmin = w->gpu_start;
        }
        if (w->gpu_end > instance->gmax) {
            instance->gmax = w->gpu_end;
        }
    }
    add_work(s, instance->work, (int)w->kind, duration, w->size);
    if (w->kind == 0 && top_kernel) {
        Slot *slot = map_find(&s->kernel_of, w->kernel, w->kernel_tag, instance->node);
        if (USED(slot)) {
            KernelEntry *seen = &s->kernels[VALUE(slot)];
            add(s, &seen->count, 1);
            add(s, &seen->ns, duration);
            return 0;
        }
        GROW(s->kernels, s->nkernels, s->kernels_capacity, {
            PyErr_NoMemory();
            return -1;
        });
        KernelEntry *entry = &s->kernels[s->nkernels];
        entry->count = 1;
        entry->ns = duration;
        entry->node = instance->node;
        entry->tag = w->kernel_tag;
        entry->value = w->kernel;
        if (map_claim(&s->kernel_of, slot, w->kernel, w->kernel_tag, instance->node, (int32_t)s->nkernels++) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static int launch_among_start_end(Sweep *s, int32_t index, const Launch *w, int64_t duration)
{
    Thread *thread = &s->threads[index];
    Stack *stack = &thread->stack, *active = &thread->active;
    if (stack->count && credit(s, &stack->items[stack->count - 1], w, duration, 1) < 0) {
        return -1;
    }
    int credited = stack->count > 0;
    uint64_t number = ++s->launch_number;
    size_t kept = 0;
    for (size_t i = 0; i < active->count; i++) {
        if (active->items[i].end < w->at) {
            finish(s, &active->items[i], NULL);
            continue;
        }
        active->items[kept] = active->items[i];
        Instance *instance = &active->items[kept++];
        int32_t key = s->key[instance->node];
        int repeat = names_get(s, index, key) > 0 || s->counted[key] == number;
        s->counted[key] = number;
        credited = 1;
        if (credit(s, instance, w, duration, !repeat) < 0) {
            return -1;
        }
        if (repeat) {
            Slot *slot = map_find(&s->repeat_of, instance->node, 0, 0);
            if (!USED(slot)) {
                GROW(s->repeats, s->nrepeats, s->repeats_capacity, {
                    PyErr_NoMemory();
                    return -1;
                });
                memset(&s->repeats[s->nrepeats], 0, sizeof s->repeats[0]);
                s->repeats[s->nrepeats].node = instance->node;
                if (map_claim(&s->repeat_of, slot, instance->node, 0, 0, (int32_t)s->nrepeats++) < 0) {
                    PyErr_NoMemory();
                    return -1;
                }
                slot = map_find(&s->repeat_of, instance->node, 0, 0);
            }
            add_work(s, s->repeats[VALUE(slot)].work, (int)w->kind, duration, w->size);
        }
    }
    active->count = kept;
    if (!credited) {
        return outside(s, thread, w, duration);
    }
    return 0;
}

static int launch(Sweep *s, const Launch *w)
{
    int32_t index = thread_of(s, w->global_tid);
    if (index < 0) {
        return -1;
    }
    Thread *thread = &s->threads[index];
    while (thread->stack.count && thread->stack.items[thread->stack.count - 1].end < w->at) {
        if (pop(s, index) < 0) {
            return -1;
        }
    }
    int64_t duration = difference(s, w->gpu_end, w->gpu_start);
    add_work(s, s->launched, (int)w->kind, duration, w->size);
    if (thread->active.count) {
        return launch_among_start_end(s, index, w, duration);
    }
    if (thread->stack.count) {
        return credit(s, &thread->stack.items[thread->stack.count - 1], w, duration, 1);
    }
    return outside(s, thread, w, duration);
}

static int push(Stack *stack, int64_t end, int64_t start, int32_t node)
{
    GROW(stack->items, stack->count, stack->capacity, {
        PyErr_NoMemory();
        return -1;
    });
    Instance *instance = &stack->items[stack->count++];
    instance->end = end;
    instance->start = start;
    instance->node = node;
    instance->has_work = 0;
    return 0;
}

/* Start/end ranges need not nest with anything: each is a root of its own, apart from push/pop
 * ranges of the same name (`Sweep._start_end`). */
static int start_end_range(Sweep *s, Thread *thread, const Range *r)
{
    int32_t key = key_of(s, r->domain, r->sid);
    if (key < 0) {
        return PYERROR;
    }
    int64_t apart;
    if (__builtin_sub_overflow((int64_t)-1, r->domain, &apart)) {
        s->overflow = 1;
    }
    Slot *slot = map_find(&s->node_of, apart, r->sid, thread->root);
    int32_t node;
    if (USED(slot)) {
        node = VALUE(slot);
    } else {
        node = add_node(s, thread->root, key, thread->group, 0, 1);
        if (node < 0) {
            return PYERROR;
        }
        if (map_claim(&s->node_of, slot, apart, r->sid, thread->root, node) < 0) {
            PyErr_NoMemory();
            return PYERROR;
        }
    }
    return push(&thread->active, r->end, r->start, node) < 0 ? PYERROR : ROW;
}

/* A push/pop range: the ranges it outlived end, and it opens at its position in the tree. */
static int push_pop_range(Sweep *s, int32_t index, const Range *r)
{
    Thread *thread = &s->threads[index];
    while (thread->stack.count && thread->stack.items[thread->stack.count - 1].end < r->start) {
        if (pop(s, index) < 0) {
            return PYERROR;
        }
    }
    int32_t parent = thread->stack.count ? thread->stack.items[thread->stack.count - 1].node : thread->root;
    Slot *slot = map_find(&s->node_of, r->domain, r->sid, parent);
    int32_t node, key;
    if (USED(slot)) {
        node = VALUE(slot);
        key = s->key[node];
    } else {
        key = key_of(s, r->domain, r->sid);
        if (key < 0) {
            return PYERROR;
        }
        /* Shadowed: an instance of the same name encloses this position (recursion). */
        node = add_node(s, parent, key, thread->group, names_get(s, index, key) > 0, 0);
        if (node < 0) {
            return PYERROR;
        }
        if (map_claim(&s->node_of, slot, r->domain, r->sid, parent, node) < 0) {
            PyErr_NoMemory();
            return PYERROR;
        }
    }
    if (names_add(s, index, key, 1) < 0) {
        return PYERROR;
    }
    return push(&thread->stack, r->end, r->start, node) < 0 ? PYERROR : ROW;
}

/* The launches from `w` on whose call starts before `before` (`all`: every one left): an outcome. */
static int launches_before(Sweep *s, Launches *launches, Launch *w, int *have, int64_t before, int all)
{
    while (*have == ROW && (all || w->at < before)) {
        if (launch(s, w) < 0) {
            return PYERROR;
        }
        *have = next_launch(s, launches, w);
        if (*have < 0) {
            return *have;
        }
    }
    return ROW;
}

/* Every range and launch walked, then what is still open ended: ROW when done (the state holds
 * the tally), else an outcome above. */
int sweep(Sweep *s, Ranges *ranges, Launches *launches)
{
    Launch w;
    Range r;
    int have = next_launch(s, launches, &w), outcome;
    if (have < 0) {
        return have;
    }
    while ((outcome = next_range(s, ranges, &r)) == ROW) {
        /* A range that starts when a call starts encloses it: launches strictly before go first. */
        if ((outcome = launches_before(s, launches, &w, &have, r.start, 0)) != ROW) {
            return outcome;
        }
        int32_t index = thread_of(s, r.global_tid);
        if (index < 0 || (r.sid != NONE && (r.sid = range_name(s, r.raw)) == -2)) {
            return PYERROR;
        }
        outcome = r.start_end ? start_end_range(s, &s->threads[index], &r) : push_pop_range(s, index, &r);
        if (outcome != ROW) {
            return outcome;
        }
    }
    if (outcome != END) {
        return outcome;
    }
    if ((outcome = launches_before(s, launches, &w, &have, 0, 1)) != ROW) {
        return outcome;
    }
    for (size_t i = 0; i < s->nthreads; i++) {
        while (s->threads[i].stack.count) {
            if (pop(s, (int32_t)i) < 0) {
                return PYERROR;
            }
        }
        Thread *thread = &s->threads[i];
        for (size_t j = 0; j < thread->active.count; j++) {
            finish(s, &thread->active.items[j], NULL);
        }
        thread->active.count = 0;
    }
    return ROW;
}

