/* thread.c - tether's own threads: detached, with every signal blocked, so
 * that the application's signals go to its own threads (a program under
 * libtether-preload never knew such a thread exists). */
#include "internal.h"

#include <pthread.h>
#include <signal.h>

int tether__thread_spawn(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_attr_t a;
    if (pthread_attr_init(&a) != 0)
        return -1;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    return rc == 0 ? 0 : -1;
}
