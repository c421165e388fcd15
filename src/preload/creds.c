/* creds.c - what libpq would connect with, beyond the program's string
 * (docs/preload.md, "Which pool"): the values libpq takes from the
 * environment for keywords the string leaves out (PQconndefaults names
 * them: PGUSER, PGPASSWORD, PGOPTIONS, PGSERVICE, ...), the process's user
 * name for a missing user, the identity of the password file libpq would
 * read, and a keyed hash that stands for a secret in a pool's key. */
#include "conninfo.h"
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the keyed hash (SipHash-2-4, two keys: 128 bits) ------------------- */

static uint64_t hash_key[4];
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;

static void hash_init(void) {
    if (getrandom(hash_key, sizeof(hash_key), 0) != (ssize_t)sizeof(hash_key)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        for (int i = 0; i < 4; i++)
            hash_key[i] ^= (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull +
                           (uint64_t)getpid() * (uint64_t)(i + 1) +
                           (uint64_t)(uintptr_t)&ts;
    }
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4]) {
    v[0] += v[1];
    v[1] = ROTL(v[1], 13) ^ v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17) ^ v[2];
    v[2] = ROTL(v[2], 32);
}

static uint64_t siphash(const unsigned char *m, size_t n, uint64_t k0,
                        uint64_t k1) {
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, m + i, 8);
        v[3] ^= w;
        sip_round(v);
        sip_round(v);
        v[0] ^= w;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t j = 0; i + j < n; j++)
        last |= (uint64_t)m[i + j] << (8 * j);
    v[3] ^= last;
    sip_round(v);
    sip_round(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static void hash_bytes(const void *m, size_t n, char out[33]) {
    pthread_once(&hash_once, hash_init);
    uint64_t a = siphash(m, n, hash_key[0], hash_key[1]);
    uint64_t b = siphash(m, n, hash_key[2], hash_key[3]);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

void tether__preload_hash_hex(const char *s, char out[33]) {
    hash_bytes(s, strlen(s), out);
}

/* ---- the environment ---------------------------------------------------- */

/* libpq's keywords that have an environment variable, learnt once. */
typedef struct env_kw {
    char kw[40], var[40];
} env_kw;
static env_kw *envs;
static size_t nenvs;
static pthread_once_t envs_once = PTHREAD_ONCE_INIT;

static void learn(void) {
    PQconninfoOption *o = PQconndefaults();
    size_t n = 0;
    for (PQconninfoOption *p = o; p && p->keyword; p++)
        n += p->envvar != NULL;
    envs = o ? calloc(n ? n : 1, sizeof(*envs)) : NULL;
    for (PQconninfoOption *p = o; envs && p && p->keyword; p++)
        if (p->envvar && strlen(p->keyword) < 40 && strlen(p->envvar) < 40) {
            strcpy(envs[nenvs].kw, p->keyword);
            strcpy(envs[nenvs].var, p->envvar);
            nenvs++;
        }
    PQconninfoFree(o);
}

/* The session settings libpq sends from the environment in the startup
 * packet, not as keywords (fe-protocol3.c): not part of a key. */
static const char *const session_vars[] = {"PGDATESTYLE", "PGTZ", "PGGEQO"};

/* os_user: what libpq takes for a missing user (its pg_fe_getauthname). */
static int os_user(char *out, size_t cap) {
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) != 0 || !res ||
        strlen(res->pw_name) >= cap)
        return -1;
    strcpy(out, res->pw_name);
    return 0;
}

int tether__preload_creds_add(const tether__conninfo *ci, tether__preload_sb *b,
                              const char **why) {
    pthread_once(&envs_once, learn);
    if (!envs) {
        *why = "libpq's defaults (PQconndefaults) could not be read";
        return -1;
    }
    for (size_t i = 0; i < sizeof(session_vars) / sizeof(*session_vars); i++) {
        const char *v = getenv(session_vars[i]);
        if (v && strcasecmp(v, "default")) {
            *why = "PGDATESTYLE, PGTZ or PGGEQO is set (sent by libpq "
                   "outside the connection string)";
            return -1;
        }
    }
    for (size_t i = 0; i < nenvs; i++) {
        const char *v = getenv(envs[i].var);
        if (v && !tether__conninfo_get(ci, envs[i].kw))
            tether__preload_sb_kv(b, envs[i].kw, v);
    }
    char user[256];
    if (!tether__conninfo_get(ci, "user") && !getenv("PGUSER")) {
        if (os_user(user, sizeof(user)) != 0) {
            *why = "no user given and the process's user name is unknown";
            return -1;
        }
        tether__preload_sb_kv(b, "user", user);
    }
    return 0;
}

/* ---- the password file -------------------------------------------------- */

/* file_id appends "path:mode:hash of the content" (or "path:absent") to b.
 * Returns -1 when the file exists and cannot be read. */
static int file_id(const char *path, tether__preload_sb *b) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        tether__preload_sb_str(b, path);
        tether__preload_sb_str(b, ":absent;");
        return 0;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size > (1 << 20)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size + 1) : -1;
    close(fd);
    if (n < 0 || n > st.st_size) {
        free(buf);
        return -1;
    }
    char h[33], mode[32];
    hash_bytes(buf, (size_t)n, h);
    free(buf);
    snprintf(mode, sizeof(mode), ":%o:", (unsigned)st.st_mode);
    tether__preload_sb_str(b, path);
    tether__preload_sb_str(b, mode);
    tether__preload_sb_str(b, h);
    tether__preload_sb_str(b, ";");
    return 0;
}

int tether__preload_creds_passfile(const tether__conninfo *eff,
                                   tether__preload_sb *b, const char **why) {
    const char *pw = tether__conninfo_get(eff, "password");
    if (pw && *pw)
        return 0; /* libpq reads no password file */
    const char *pf = tether__conninfo_get(eff, "passfile");
    char path[2][4096];
    int n = 0;
    if (pf && *pf) {
        snprintf(path[n++], sizeof(path[0]), "%s", pf);
    } else { /* libpq: $HOME, else the user's home directory */
        const char *home = getenv("HOME");
        struct passwd pwd, *res = NULL;
        char buf[4096];
        if (home && *home)
            snprintf(path[n++], sizeof(path[0]), "%s/.pgpass", home);
        if (getpwuid_r(geteuid(), &pwd, buf, sizeof(buf), &res) == 0 && res &&
            (!n || strcmp(res->pw_dir, home)))
            snprintf(path[n++], sizeof(path[0]), "%s/.pgpass", res->pw_dir);
    }
    tether__preload_sb_str(b, " passfile_id=");
    for (int i = 0; i < n; i++)
        if (file_id(path[i], b) != 0) {
            *why = "the password file cannot be read by the preload";
            return -1;
        }
    return 0;
}
