/* cq.c - the non-blocking acquire for event loops: completion queues with a
 * pollable eventfd, and pool waiters that are queue entries instead of
 * sleeping threads. An entry sits in the pool's one FIFO wait queue beside
 * the blocking callers; whoever would wake a blocked thread posts the entry
 * to its completion queue instead (the wake it carries, cq_entry_wake).
 * Connections are created on short-lived worker threads, deadlines are kept by
 * the pool's 10 ms tick (tether__cq_expire). The design is in docs/evloop.md.
 *
 * Locks: the pool's lock, then the cq's; never the other way round. An
 * entry's pool-side fields (state, canceled, its place in the queue and in
 * p->cq_entries) are guarded by the pool's lock; once posted to its cq, only
 * tether_cq_next (or tether_cq_destroy) touches it, and frees it. Nobody
 * touches an entry after handing it to the queue or to its cq. */
#include "cq.h"
#include "waitq.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ENTRY_FILE "tether_pool_acquire_start" /* leak reports' "file" */
#define CHUNK_ENTRIES 64 /* entries allocated together (cq_entry_new) */
#define FAR_OFF_MS 50    /* far_off: well over the coarse clock's lag */

enum { ENTRY_NEW = 0, ENTRY_QUEUED, ENTRY_WORKING, ENTRY_POSTED };

typedef struct tether__cq_entry tether__cq_entry;
struct tether__cq_entry {
    tether__waiter w; /* the wait queue entry, woken by cq_entry_wake */
    tether__cq_entry *pnext, *pprev; /* p->cq_entries (pool lock) */
    tether__cq_entry *cnext, *cprev; /* cq->all */
    tether__cq_entry *rnext;         /* cq's ready list (cq lock) */
    tether_cq *cq;
    tether_pool *owner;        /* the pool of the acquire */
    tether_pool *_Atomic pool; /* owner until posted with an error */
    uint64_t ticket;
    void *user;
    int64_t start_ns;   /* the deadline is w.deadline_ns */
    int rc;             /* the outcome when slot is NULL */
    int no_create;      /* a connect was refused: wait */
    uint8_t state;      /* ENTRY_* (pool lock) */
    uint8_t linked;     /* in p->cq_entries (pool lock) */
    uint8_t canceled;   /* pool lock */
    uint8_t checked;    /* slot checked out already */
    tether__slot *slot; /* the connection posted, or NULL */
    tether_error *err;  /* NULL until the acquire fails (entry_err) */
};

/* Entries come from chunks of CHUNK_ENTRIES, kept until the cq is
 * destroyed; a freed entry goes on the cq's free list for the next
 * acquire (docs/evloop.md, "Cost"). */
typedef struct cq_chunk {
    struct cq_chunk *next;
    tether__cq_entry e[CHUNK_ENTRIES];
} cq_chunk;

struct tether_cq {
    int fd;
    pthread_mutex_t lock;
    pthread_cond_t posted;       /* an entry was posted, while draining */
    int draining;                /* tether_cq_destroy waits on posted */
    tether__cq_entry *all;       /* every entry not freed yet */
    tether__cq_entry *free_list; /* freed entries, linked by cnext */
    cq_chunk *chunks;            /* the newest first */
    int chunk_used;              /* entries taken from chunks->e */
    tether__cq_entry *ready, *ready_tail;
    int nall, nready;
    int signaled;               /* the eventfd's counter is not 0 */
    int has_loop;               /* tether_cq_loop_thread: loop_thread is set */
    pthread_t loop_thread;      /* posts on it need no wake-up */
    tether_cq_notify_fn notify; /* tether_cq_loop_notify, or NULL */
    void *notify_arg;
    int notified; /* notify called since a take last found cq empty */
};

static _Atomic uint64_t next_ticket = 1;

/* ---- the completion queue ------------------------------------------------ */

tether_cq *tether_cq_create(tether_error *err) {
    tether_cq *cq = tether__malloc(sizeof(*cq));
    if (!cq) {
        tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT, NULL);
        return NULL;
    }
    memset(cq, 0, sizeof(*cq));
    cq->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cq->fd < 0) {
        tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                         "cq: eventfd: %s", strerror(errno));
        tether__free(cq);
        return NULL;
    }
    pthread_mutex_init(&cq->lock, NULL);
    pthread_cond_init(&cq->posted, NULL);
    return cq;
}

int tether_cq_fd(const tether_cq *cq) {
    return cq ? cq->fd : -1;
}

int tether_cq_pending(tether_cq *cq) {
    if (!cq)
        return 0;
    pthread_mutex_lock(&cq->lock);
    int n = cq->nall;
    pthread_mutex_unlock(&cq->lock);
    return n;
}

/* A zeroed entry linked into cq->all, or NULL when out of memory. */
static tether__cq_entry *cq_entry_new(tether_cq *cq) {
    pthread_mutex_lock(&cq->lock);
    tether__cq_entry *e = cq->free_list;
    if (e) {
        cq->free_list = e->cnext;
    } else if (cq->chunks && cq->chunk_used < CHUNK_ENTRIES) {
        e = &cq->chunks->e[cq->chunk_used++];
    } else {
        cq_chunk *c = tether__malloc(sizeof(*c));
        if (!c) {
            pthread_mutex_unlock(&cq->lock);
            return NULL;
        }
        c->next = cq->chunks;
        cq->chunks = c;
        cq->chunk_used = 1;
        e = &c->e[0];
    }
    memset(e, 0, sizeof(*e));
    e->cnext = cq->all;
    if (cq->all)
        cq->all->cprev = e;
    cq->all = e;
    cq->nall++;
    pthread_mutex_unlock(&cq->lock);
    return e;
}

static void cq_free(tether_cq *cq, tether__cq_entry *e) {
    pthread_mutex_lock(&cq->lock);
    if (e->cprev)
        e->cprev->cnext = e->cnext;
    else
        cq->all = e->cnext;
    if (e->cnext)
        e->cnext->cprev = e->cprev;
    cq->nall--;
    tether_error *err = e->err;
    e->cnext = cq->free_list;
    cq->free_list = e;
    pthread_mutex_unlock(&cq->lock);
    tether__free(err);
}

static void bind_loop(tether_cq *cq, int on, tether_cq_notify_fn fn,
                      void *arg) {
    pthread_mutex_lock(&cq->lock);
    cq->loop_thread = pthread_self();
    cq->has_loop = on ? 1 : 0;
    cq->notify = on ? fn : NULL;
    cq->notify_arg = arg;
    cq->notified = 0;
    if (cq->ready && !cq->signaled) { /* posted unsignaled: wake */
        uint64_t one = 1;
        cq->signaled = write(cq->fd, &one, sizeof(one)) == sizeof(one);
    }
    pthread_mutex_unlock(&cq->lock);
}

void tether_cq_loop_thread(tether_cq *cq, int on) {
    if (cq)
        bind_loop(cq, on, NULL, NULL);
}

void tether_cq_loop_notify(tether_cq *cq, tether_cq_notify_fn fn, void *arg) {
    if (cq && fn)
        bind_loop(cq, 1, fn, arg);
}

/* on_loop: the caller is the thread that takes cq's completions before its
 * loop next waits (tether_cq_loop_thread); lock held. */
static int on_loop(tether_cq *cq) {
    return cq->has_loop && pthread_equal(cq->loop_thread, pthread_self());
}

/* Append e to cq's ready list; the eventfd turns readable with the first,
 * unless the loop's own thread posts it: its loop takes it before it waits,
 * told by the notify function once until a take finds cq empty, when it
 * has one (tether_cq_loop_notify; called after the cq's lock is let go). */
static void cq_push(tether_cq *cq, tether__cq_entry *e) {
    pthread_mutex_lock(&cq->lock);
    e->rnext = NULL;
    if (cq->ready_tail)
        cq->ready_tail->rnext = e;
    else
        cq->ready = e;
    cq->ready_tail = e;
    cq->nready++;
    tether_cq_notify_fn notify = NULL;
    if (!on_loop(cq)) {
        if (!cq->signaled) {
            uint64_t one = 1;
            cq->signaled = write(cq->fd, &one, sizeof(one)) == sizeof(one);
        }
    } else if (cq->notify && !cq->notified) {
        cq->notified = 1;
        notify = cq->notify;
    }
    void *arg = cq->notify_arg;
    if (cq->draining)
        pthread_cond_broadcast(&cq->posted);
    pthread_mutex_unlock(&cq->lock);
    if (notify) /* only the loop's thread changes it: still valid */
        notify(arg);
}

/* Take the first ready entry. The eventfd is drained when a take finds
 * the list empty, not with its last entry: a loop that takes completions
 * until none is left, and in their callbacks starts acquires that complete
 * at once, posts those without a write (the fd is still signaled) and pays
 * one read at the end, instead of a write and a read per completion
 * (docs/evloop.md, "What it costs"). */
static tether__cq_entry *cq_pop(tether_cq *cq) {
    pthread_mutex_lock(&cq->lock);
    tether__cq_entry *e = cq->ready;
    if (e) {
        cq->ready = e->rnext;
        if (!cq->ready)
            cq->ready_tail = NULL;
        cq->nready--;
    } else {
        cq->notified = 0;
        uint64_t v;
        if (cq->signaled && read(cq->fd, &v, sizeof(v)) == sizeof(v))
            cq->signaled = 0;
    }
    pthread_mutex_unlock(&cq->lock);
    return e;
}

/* ---- posting (pool lock held) -------------------------------------------- */

static void pool_link(tether_pool *p, tether__cq_entry *e) {
    e->pprev = NULL;
    e->pnext = p->cq_entries;
    if (p->cq_entries)
        p->cq_entries->pprev = e;
    p->cq_entries = e;
    e->linked = 1;
}

static void pool_unlink(tether_pool *p, tether__cq_entry *e) {
    if (!e->linked)
        return;
    if (e->pprev)
        e->pprev->pnext = e->pnext;
    else
        p->cq_entries = e->pnext;
    if (e->pnext)
        e->pnext->pprev = e->pprev;
    e->pnext = e->pprev = NULL;
    e->linked = 0;
}

/* entry_err is where e's failure is written: allocated at the first
 * failure, so that a queued acquire does not carry a tether_error of 300
 * bytes it almost never needs (docs/evloop.md, "Cost"). NULL when that
 * allocation fails: the completion then says the details were lost. */
static tether_error *entry_err(tether__cq_entry *e) {
    if (!e->err && (e->err = tether__malloc(sizeof(*e->err))))
        tether_error_clear(e->err);
    return e->err;
}

/* Post e with connection s, or with error rc (entry_err filled, unless the
 * acquire was canceled meanwhile). An entry posted with an error is done
 * with its pool; one with a connection stays in p->cq_entries until
 * tether_cq_next takes it, so that a cancel can still return it. */
static void post_locked(tether_pool *p, tether__cq_entry *e, tether__slot *s,
                        int rc) {
    if (!e->linked)
        pool_link(p, e);
    e->state = ENTRY_POSTED;
    e->slot = s;
    if (!s) {
        if (e->canceled)
            rc = tether_error_set(entry_err(e), TETHER_ECANCELED,
                                  TETHER_CLASS_PERMANENT,
                                  "pool %s: acquire canceled", p->name);
        e->rc = rc;
        pool_unlink(p, e);
        atomic_store(&e->pool, NULL);
    }
    cq_push(e->cq, e);
}

static void post_error_locked(tether_pool *p, tether__cq_entry *e, int rc,
                              tether_class cls, const char *what) {
    tether_error_set(entry_err(e), rc, cls, "pool %s: %s", p->name, what);
    post_locked(p, e, NULL, rc);
}

static void post_timeout_locked(tether_pool *p, tether__cq_entry *e) {
    tether__pool_timed_out(p, (e->w.deadline_ns - e->start_ns) / 1000000,
                           entry_err(e), 1);
    post_locked(p, e, NULL, TETHER_ETIMEDOUT);
}

/* ---- workers: connections are created off the caller's thread ----------- */

static void drive(tether__cq_entry *e);

static void *worker_main(void *arg) {
    tether__cq_entry *e = arg;
    tether_pool *p = e->owner;
    tether__slot *s = NULL;
    tether_error err;
    tether_error_clear(&err);
    int rc = tether__pool_create_reserved(p, tether__ms_left(e->w.deadline_ns),
                                          &s, &err);
    int ok = rc == 0 && tether__pool_checkout(p, s, ENTRY_FILE, 0) >= 0;
    e->no_create = 0;
    if (ok) {
        pthread_mutex_lock(&p->lock);
        e->checked = 1;
        post_locked(p, e, s, 0);
        pthread_mutex_unlock(&p->lock);
    } else if (rc == 0 || tether__pool_refused(p, rc, &err, e->w.deadline_ns,
                                               &e->no_create)) {
        drive(e); /* the new connection failed its check, or wait */
    } else {
        pthread_mutex_lock(&p->lock);
        if (rc == TETHER__EPROBING) { /* its deadline came first */
            post_timeout_locked(p, e);
        } else {
            tether_error *to = entry_err(e);
            if (to)
                *to = err;
            post_locked(p, e, NULL, rc);
        }
        pthread_mutex_unlock(&p->lock);
    }
    tether__pool_bg_done(p); /* p outlives us: destroy waits for bg */
    return NULL;
}

/* Start a worker that creates a connection for e, whose reservation is
 * counted in total and creating (lock held). */
static void start_worker_locked(tether_pool *p, tether__cq_entry *e) {
    e->state = ENTRY_WORKING;
    p->bg++;
    if (tether__pool_spawn(worker_main, e) == 0)
        return;
    p->bg--;
    p->total--;
    p->creating--;
    pthread_cond_broadcast(&p->drained);
    post_error_locked(p, e, TETHER_ENOMEM, TETHER_CLASS_TRANSIENT,
                      "cannot start a thread to connect");
}

/* cq_entry_wake is a non-blocking waiter's wake (its wake_arg is its entry):
 * for the entry, already out of the queue, what a signal of its condition
 * variable does for a thread: post the connection handed over (w->given),
 * start a worker to create one (WAKE_CREATE, WAKE_AGAIN: the reservation is
 * made) or post TETHER_ECLOSED (WAKE_CLOSED). Lock held. */
static void cq_entry_wake(void *arg, tether__waiter *w) {
    tether__cq_entry *e = arg;
    tether_pool *p = e->owner;
    e->state = ENTRY_NEW;
    if (w->given) {
        e->checked = 0; /* checked by tether_cq_next, outside the lock */
        post_locked(p, e, w->given, 0);
    } else if (w->woken == WAKE_CLOSED) {
        post_error_locked(p, e, TETHER_ECLOSED, TETHER_CLASS_PERMANENT,
                          "closed");
    } else {
        if (w->woken == WAKE_AGAIN) { /* connect to get the breaker's error */
            p->total++;
            p->creating++;
        }
        start_worker_locked(p, e);
    }
}

/* ---- the acquire --------------------------------------------------------- */

/* far_off says, from the coarse clock, whether deadline_ns is surely
 * still ahead: the coarse word lags the monotonic clock by at most a tick
 * and a jiffy (~15 ms; core/internal.h), so this spares the precise read
 * for the long and the absent deadlines. */
static int far_off(int64_t deadline_ns) {
    return tether__ticker_ms() + FAR_OFF_MS < deadline_ns / TETHER__NS_PER_MS;
}

/* Queue e, or start a creation for it, or post its failure (lock held).
 * Returns 1 when e was queued: the caller then rescans (still holding the
 * lock, so that nobody can have served e meanwhile). */
static int queue_locked(tether_pool *p, tether__cq_entry *e) {
    if (atomic_load(&p->closing)) {
        post_error_locked(p, e, TETHER_ECLOSED, TETHER_CLASS_PERMANENT,
                          "closed");
        return 0;
    }
    if (e->canceled) {
        post_locked(p, e, NULL, TETHER_ECANCELED);
        return 0;
    }
    if (!far_off(e->w.deadline_ns) && tether__mono_ns() >= e->w.deadline_ns) {
        post_timeout_locked(p, e);
        return 0;
    }
    tether__pool_grant_locked(p); /* earlier arrivals first */
    int64_t blocked = 0;
    int next =
        tether__pool_arrive_locked(p, e->no_create, e->w.deadline_ns, &blocked);
    if (next == ARRIVE_CREATE) {
        p->total++;
        p->creating++;
        start_worker_locked(p, e);
        return 0;
    }
    if (p->nqueued >= p->o.max_waiters) {
        atomic_fetch_add(&p->queue_full, 1);
        tether_error_set(
            entry_err(e), TETHER_EQUEUEFULL, TETHER_CLASS_THROTTLED,
            "pool %s: %d callers already waiting", p->name, p->o.max_waiters);
        post_locked(p, e, NULL, TETHER_EQUEUEFULL);
        return 0;
    }
    e->state = ENTRY_QUEUED;
    e->w.given = NULL;
    e->w.woken = WAKE_NONE;
    if (next == ARRIVE_PROBE) /* the pool's tick grants it at the period's */
        e->no_create = 0;     /* end (tether__pool_grant_due) */
    if (atomic_load(&p->queued_no_thread) == 0 ||
        e->w.deadline_ns < p->cq_due_ns)
        p->cq_due_ns = e->w.deadline_ns;
    tether__waitq_push(p, &e->w);
    return 1;
}

/* Serve e now from an idle connection, or queue it: the blocking slow
 * path's round without the sleep. Runs on the caller's thread (start,
 * tether_cq_next) or a worker's; never blocks on a wait. */
static void drive(tether__cq_entry *e) {
    tether_pool *p = e->owner;
    for (;;) {
        /* An idle connection only when no waiter must be served first
         * (tether__waitq_overdue: the blocking fast path's rule): with
         * acquires queued, the scan would fail, or pass them by. */
        tether__slot *s = atomic_load(&p->closing) || tether__waitq_overdue(p)
                              ? NULL
                              : tether__pool_take_idle(p);
        if (!s) {
            pthread_mutex_lock(&p->lock);
            if (!e->linked)
                pool_link(p, e);
            if (!queue_locked(p, e)) {
                pthread_mutex_unlock(&p->lock);
                return;
            }
            /* Queued: rescan, as a blocking waiter does after queuing (the
             * count's increment is seq_cst, ordered before these loads; see
             * tether__pool_put_idle). Under the lock, so e is still ours. */
            atomic_thread_fence(memory_order_seq_cst);
            s = tether__pool_take_idle(p);
            if (s) {
                tether__waitq_remove(p, &e->w, 1);
                e->state = ENTRY_NEW;
            }
            pthread_mutex_unlock(&p->lock);
            if (!s)
                return; /* e belongs to the queue now */
        }
        if (tether__pool_checkout(p, s, ENTRY_FILE, 0) >= 0) {
            pthread_mutex_lock(&p->lock);
            e->checked = 1;
            post_locked(p, e, s, 0);
            pthread_mutex_unlock(&p->lock);
            return;
        }
    }
}

int tether_pool_acquire_start(tether_pool *p, tether_cq *cq, int64_t timeout_ms,
                              void *user, uint64_t *ticket, tether_error *err) {
    if (ticket)
        *ticket = 0;
    if (!p || !cq)
        return tether__null(err, "tether_pool_acquire_start", p ? "cq" : "p");
    int rc = tether__pool_acquire_limit(p, timeout_ms, &timeout_ms, err);
    if (rc)
        return rc;
    tether__cq_entry *e = cq_entry_new(cq);
    if (!e)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    e->w.wake = cq_entry_wake;
    e->w.wake_arg = e;
    e->w.no_thread = 1;
    e->cq = cq;
    e->owner = p;
    atomic_init(&e->pool, p);
    e->ticket = atomic_fetch_add(&next_ticket, 1);
    e->user = user;
    e->start_ns = tether__mono_ns();
    e->w.deadline_ns = e->start_ns + timeout_ms * 1000000LL;
    if (ticket)
        *ticket = e->ticket;
    drive(e); /* e may be posted, taken and freed once this returns */
    return 0;
}

/* The queue is walked only once the earliest deadline in it has come
 * (cq_due_ns): thousands of queued acquires cost the tick nothing until
 * then (walking 20000 of them every tick under the lock once took 12 % of
 * examples/evloop.c's CPU). */
void tether__cq_expire(tether_pool *p) {
    int64_t now = tether__mono_ns();
    pthread_mutex_lock(&p->lock);
    if (now >= p->cq_due_ns) {
        int64_t due = INT64_MAX;
        for (tether__waiter *w = p->head, *next; w; w = next) {
            next = w->next;
            tether__cq_entry *e = w->wake_arg;
            if (w->wake != cq_entry_wake) {
                continue;
            } else if (now >= e->w.deadline_ns) {
                tether__waitq_remove(p, w, 1);
                e->state = ENTRY_NEW;
                post_timeout_locked(p, e);
            } else if (e->w.deadline_ns < due) {
                due = e->w.deadline_ns;
            }
        }
        p->cq_due_ns = due;
    }
    pthread_mutex_unlock(&p->lock);
}

int tether_pool_acquire_cancel(tether_pool *p, uint64_t ticket) {
    if (!p)
        return TETHER_EINVAL;
    pthread_mutex_lock(&p->lock);
    tether__cq_entry *e = p->cq_entries;
    while (e && e->ticket != ticket)
        e = e->pnext;
    if (e) {
        e->canceled = 1; /* a worker or tether_cq_next sees it */
        if (e->state == ENTRY_QUEUED) {
            tether__waitq_remove(p, &e->w, 1);
            post_locked(p, e, NULL, TETHER_ECANCELED);
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (!e)
        return TETHER_ESTATE;
    return 0;
}

/* ---- taking completions -------------------------------------------------- */

/* lost_details fills out->err for a failure whose details could not be
 * kept (entry_err found no memory). */
static void lost_details(tether_completion *out, tether_pool *p, int rc) {
    tether_class cls = rc == TETHER_ECANCELED || rc == TETHER_ECLOSED
                           ? TETHER_CLASS_PERMANENT
                           : TETHER_CLASS_TRANSIENT;
    tether_error_set(&out->err, rc, cls,
                     "pool %s: %s (no memory was left for the details)",
                     p->name, tether_strerror(rc));
}

/* Turn posted entry e into *out. Returns 0 when the connection it was
 * handed failed its check (it was closed and e waits again), else 1. */
static int finish(tether__cq_entry *e, tether_completion *out) {
    tether_pool *p = atomic_load(&e->pool);
    int rc = e->rc;
    tether_lease *lease = NULL;
    if (p) { /* posted with a connection */
        pthread_mutex_lock(&p->lock);
        pool_unlink(p, e);
        int canceled = e->canceled;
        pthread_mutex_unlock(&p->lock);
        tether__slot *s = e->slot;
        e->slot = NULL;
        if (canceled) {
            tether__pool_put_idle(p, s);
            rc = tether_error_set(entry_err(e), TETHER_ECANCELED,
                                  TETHER_CLASS_PERMANENT,
                                  "pool %s: acquire canceled", p->name);
        } else if (!e->checked &&
                   tether__pool_checkout(p, s, ENTRY_FILE, 0) < 0) {
            e->state = ENTRY_NEW;
            drive(e);
            return 0;
        } else {
            tether__pool_hist_add(p, (tether__mono_ns() - e->start_ns) / 1000);
            lease = lease_token(
                s, atomic_load_explicit(&s->state, memory_order_relaxed));
            rc = 0;
        }
    }
    out->size = sizeof(*out);
    out->ticket = e->ticket;
    out->user = e->user;
    out->pool = e->owner;
    out->rc = rc;
    out->lease = lease;
    if (lease)
        tether_error_clear(&out->err);
    else if (e->err)
        out->err = *e->err;
    else
        lost_details(out, e->owner, rc);
    cq_free(e->cq, e);
    return 1;
}

int tether_cq_next_sized(tether_cq *cq, tether_completion *out, size_t size) {
    if (!cq || !out || size < sizeof(size_t))
        return TETHER_EINVAL;
    tether_completion full;
    int direct = size == sizeof(full); /* the caller's is this one */
    for (;;) {
        tether__cq_entry *e = cq_pop(cq);
        if (!e)
            return TETHER_EAGAIN;
        if (finish(e, direct ? out : &full)) {
            if (!direct)
                tether__sized_out(out, size, &full, sizeof(full));
            return 0;
        }
    }
}

void tether_cq_destroy(tether_cq *cq) {
    if (!cq)
        return;
    /* Only this thread adds or frees entries now (no other call on cq may
     * run): the list can be walked; posting only touches the ready list. */
    pthread_mutex_lock(&cq->lock);
    tether__cq_entry *e = cq->all;
    pthread_mutex_unlock(&cq->lock);
    for (; e; e = e->cnext) {
        tether_pool *p = atomic_load(&e->pool);
        if (p)
            tether_pool_acquire_cancel(p, e->ticket);
    }
    pthread_mutex_lock(&cq->lock);
    cq->draining = 1;
    while (cq->nready < cq->nall) /* workers still connecting */
        pthread_cond_wait(&cq->posted, &cq->lock);
    pthread_mutex_unlock(&cq->lock);
    tether_completion c;
    while (tether_cq_next(cq, &c) == 0)
        tether_lease_release(c.lease); /* none: all were canceled */
    close(cq->fd);
    pthread_cond_destroy(&cq->posted);
    pthread_mutex_destroy(&cq->lock);
    for (cq_chunk *k = cq->chunks, *next; k; k = next) {
        next = k->next;
        tether__free(k);
    }
    tether__free(cq);
}
