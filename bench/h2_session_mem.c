/* h2_session_mem.c - what one nghttp2 server session allocates: at
 * creation, and after one request and its answer (a client session of the
 * same library talks to it in memory). colibri's session options
 * (h2.c: no automatic WINDOW_UPDATE, the deflater's table size) and its
 * SETTINGS; the table sizes come from the command line.
 *
 *   cc -O1 -o /tmp/h2_session_mem bench/h2_session_mem.c -lnghttp2
 *   /tmp/h2_session_mem DEFLATE_TABLE HEADER_TABLE_SIZE   # e.g. 4096 4096
 *
 * Bytes are malloc_usable_size() of the live blocks (glibc). */
#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>

static long live, n_alloc;
static int verbose = 1;

static void count(void *p, size_t n, const char *how)
{
    if (!p)
        return;
    live += (long)malloc_usable_size(p);
    n_alloc++;
    if (verbose)
        printf("  %s %zu\n", how, n);
}
static void *m_malloc(size_t n, void *u)
{
    (void)u;
    void *p = malloc(n);
    count(p, n, "malloc");
    return p;
}
static void m_free(void *p, void *u)
{
    (void)u;
    if (p)
        live -= (long)malloc_usable_size(p);
    free(p);
}
static void *m_calloc(size_t a, size_t b, void *u)
{
    (void)u;
    void *p = calloc(a, b);
    count(p, a * b, "calloc");
    return p;
}
static void *m_realloc(void *p, size_t n, void *u)
{
    (void)u;
    const char *how = p ? "realloc" : "realloc(NULL)";
    if (p) {
        live -= (long)malloc_usable_size(p);
        n_alloc--;
    }
    p = realloc(p, n);
    count(p, n, how);
    return p;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, 0                            \
    }

static void pump(nghttp2_session *from, nghttp2_session *to)
{
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(from, &d)) > 0)
        nghttp2_session_mem_recv(to, d, (size_t)n);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s DEFLATE_TABLE HEADER_TABLE_SIZE\n", argv[0]);
        return 2;
    }
    nghttp2_mem mem = {NULL, m_malloc, m_free, m_calloc, m_realloc};
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    nghttp2_session *s, *cl;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, (size_t)atoi(argv[1]));
    printf("nghttp2 %s, server session:\n", nghttp2_version(0)->version_str);
    if (nghttp2_session_server_new3(&s, cb, NULL, opt, &mem))
        return 1;
    printf("after nghttp2_session_server_new3: %ld B in %ld blocks\n", live, n_alloc);
    verbose = 0;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 128},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, (uint32_t)atoi(argv[2])},
    };
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, 3);
    nghttp2_session_client_new(&cl, cb, NULL);
    nghttp2_submit_settings(cl, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_nv rq[] = {NV(":method", "GET"), NV(":path", "/hello.txt"), NV(":scheme", "http"),
                       NV(":authority", "127.0.0.1:8080"),
                       NV("user-agent", "h2load nghttp2/1.52.0")};
    nghttp2_submit_request(cl, NULL, rq, 5, NULL, NULL);
    pump(cl, s);
    nghttp2_nv rs[] = {NV(":status", "200"),       NV("date", "Thu, 26 Nov 2026 05:40:00 GMT"),
                       NV("server", "colibri"),    NV("content-type", "text/plain"),
                       NV("content-length", "13"), NV("etag", "\"67452301-d\"")};
    nghttp2_submit_response(s, 1, rs, 6, NULL);
    for (int i = 0; i < 3; i++) {
        pump(s, cl);
        pump(cl, s);
    }
    printf("after one request and its answer (idle): %ld B in %ld blocks\n", live, n_alloc);
    nghttp2_session_del(cl);
    nghttp2_session_del(s);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return 0;
}
