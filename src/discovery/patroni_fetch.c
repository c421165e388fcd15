/* patroni_fetch.c - one GET /cluster with libcurl (docs/patroni.md,
 * "Hostile answers"): a deadline over the whole call, no redirect
 * followed, http and https only, a body cap, a low-speed limit, and a stop
 * flag that ends the call when the discovery is being released. Runs on
 * the refresher thread only. */
#include "discovery.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init(void) {
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct body {
    char *buf;
    size_t len, cap;
    int too_big;
    const _Atomic int *stop;
} body;

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg) {
    body *b = arg;
    size_t n = size * nmemb;
    if (b->len + n > TETHER__PATRONI_MAX_BODY) {
        b->too_big = 1;
        return 0; /* CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *nb = tether__realloc(b->buf, cap);
        if (!nb)
            return 0;
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                       curl_off_t un) {
    (void)dt, (void)dn, (void)ut, (void)un;
    const body *b = arg;
    return b->stop && *b->stop; /* non-zero aborts the transfer */
}

int tether__patroni_get(const char *base_url, int64_t timeout_ms,
                        const _Atomic int *stop, char **out, size_t *len,
                        tether_error *err) {
    *out = NULL;
    *len = 0;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_PERMANENT,
                                "patroni: libcurl failed to start (%s)",
                                curl_easy_strerror(curl_init_rc));
    char url[TETHER__PATRONI_URL_MAX + 16];
    snprintf(url, sizeof(url), "%s/cluster", base_url);
    CURL *h = curl_easy_init();
    if (!h)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_TRANSIENT,
                                "patroni: out of memory");
    body b = {.stop = stop};
    char ebuf[CURL_ERROR_SIZE] = "";
    long ms = timeout_ms > 0 ? (long)timeout_ms : 1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    /* A body that trickles: under 1 byte a second for the deadline ends it
     * (the total deadline above does too). */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, ms / 1000 > 0 ? ms / 1000 : 1L);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                     (curl_off_t)TETHER__PATRONI_MAX_BODY);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &b);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tether");
    curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    int code = 0;
    if (rc == CURLE_OPERATION_TIMEDOUT)
        code = tether_error_set(err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                                "patroni: %s: no whole answer within %lld ms",
                                url, (long long)timeout_ms);
    else if (b.too_big || rc == CURLE_FILESIZE_EXCEEDED)
        code = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: %s: the answer is larger than %d "
                                "bytes",
                                url, TETHER__PATRONI_MAX_BODY);
    else if (rc != CURLE_OK)
        code = tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                                "patroni: %s: %s", url,
                                ebuf[0] ? ebuf : curl_easy_strerror(rc));
    else if (status >= 300 && status < 400)
        code = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: %s: answered %ld, a redirect "
                                "(redirects are not followed)",
                                url, status);
    else if (status != 200)
        code =
            tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                             "patroni: %s: answered %ld, not 200", url, status);
    if (code) {
        tether__free(b.buf);
        return code;
    }
    *out = b.buf;
    *len = b.len;
    return 0;
}
