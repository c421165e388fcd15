/* alloc.c - the allocator every allocation of the library goes through:
 * libc's by default, the caller's after tether_set_allocator. Aligned
 * blocks are carved out of a larger block from the same allocator (the
 * hook has no aligned call), the offset kept just before the block. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static tether_allocator current;
static _Atomic(const tether_allocator *) active; /* NULL: libc */

int tether_set_allocator(const tether_allocator *a) {
    if (!a) {
        atomic_store_explicit(&active, NULL, memory_order_release);
        return 0;
    }
    if (!a->malloc_fn || !a->realloc_fn || !a->free_fn)
        return TETHER_EINVAL;
    atomic_store_explicit(&active, NULL, memory_order_release);
    current = *a;
    atomic_store_explicit(&active, &current, memory_order_release);
    return 0;
}

static const tether_allocator *hook(void) {
    return atomic_load_explicit(&active, memory_order_acquire);
}

void *tether__malloc(size_t n) {
    const tether_allocator *a = hook();
    if (n == 0)
        n = 1; /* NULL always means failure */
    return a ? a->malloc_fn(a->ctx, n) : malloc(n);
}

void *tether__calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;
    void *p = tether__malloc(bytes);
    if (p && bytes > 0)
        memset(p, 0, bytes);
    return p;
}

void *tether__realloc(void *p, size_t n) {
    const tether_allocator *a = hook();
    if (n == 0)
        n = 1; /* never a free in disguise */
    return a ? a->realloc_fn(a->ctx, p, n) : realloc(p, n);
}

void tether__free(void *p) {
    if (!p)
        return;
    const tether_allocator *a = hook();
    if (a)
        a->free_fn(a->ctx, p);
    else
        free(p);
}

char *tether__strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = tether__malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

char *tether__strdup(const char *s) {
    return tether__strndup(s, SIZE_MAX);
}

void *tether__aligned_alloc(size_t align, size_t n) {
    if (n > SIZE_MAX - align - sizeof(size_t))
        return NULL;
    unsigned char *raw = tether__malloc(n + align + sizeof(size_t));
    if (!raw)
        return NULL;
    uintptr_t at = (uintptr_t)(raw + sizeof(size_t));
    at = (at + align - 1) & ~(uintptr_t)(align - 1);
    size_t off = (size_t)(at - (uintptr_t)raw);
    memcpy((unsigned char *)at - sizeof(size_t), &off, sizeof(off));
    return (void *)at;
}

void tether__aligned_free(void *p) {
    if (!p)
        return;
    size_t off;
    memcpy(&off, (unsigned char *)p - sizeof(size_t), sizeof(off));
    tether__free((unsigned char *)p - off);
}

void *tether_calloc(size_t n, size_t size) {
    return tether__calloc(n, size);
}

void tether_free(void *p) {
    tether__free(p);
}
