/* samples/techempower - the TechEmpower Framework Benchmarks application on
 * colibri: /plaintext, /json, /db, /queries, /fortunes and /updates.
 *
 *     make run-techempower           # or: build/samples/techempower/techempower
 *     techempower [-t THREADS] [-d DATABASE] [ADDR:PORT]
 *
 * The database is SQLite: DATABASE (created and filled if it has no tables),
 * else a fresh one in a temporary directory that is removed at exit. Each
 * worker thread has its own connection. Every JSON answer is built and
 * serialised per request with jansson; the fortunes page is rendered per
 * request with colibri's Mustache engine (fortunes.c). The Server and Date
 * headers come from colibri itself. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample.h"
#include "tfb.h"

static int append_json(const char *p, size_t len, void *resp)
{
    return colibri_resp_append(resp, p, len) ? -1 : 0;
}

/* Serialises v (taking it over) as the answer. */
static int send_json(struct colibri_response *resp, json_t *v)
{
    colibri_resp_set_type(resp, "application/json");
    int r = v ? json_dump_callback(v, append_json, resp, JSON_COMPACT) : -1;
    json_decref(v);
    return r ? 500 : 200;
}

static json_t *world_json(int id, int random_number)
{
    return json_pack("{s:i,s:i}", "id", id, "randomNumber", random_number);
}

static int plaintext(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    static const char body[] = "Hello, World!";
    return colibri_resp_send_static(resp, 200, "text/plain", body, sizeof(body) - 1);
}

static int json(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    return send_json(resp, json_pack("{s:s}", "message", "Hello, World!"));
}

static int db(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    struct tfb_thread *t = tfb_thread();
    int id, number;
    if (!t || tfb_world_get(t, id = tfb_random_id(t), &number))
        return 500;
    return send_json(resp, world_json(id, number));
}

/* ?queries=N as the benchmark wants it: missing, not an integer or below 1
 * is 1; above TFB_QUERIES_MAX is TFB_QUERIES_MAX. */
static int queries_param(struct colibri_request *req)
{
    struct colibri_str v;
    if (!colibri_req_query(req, "queries", &v) || !v.len)
        return 1;
    size_t i = v.p[0] == '-' || v.p[0] == '+';
    if (i == v.len || v.p[0] == '-')
        return 1; /* no digits, or negative */
    int n = 0;
    for (; i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9')
            return 1;
        if (n <= TFB_QUERIES_MAX)
            n = n * 10 + (v.p[i] - '0');
    }
    return n < 1 ? 1 : n > TFB_QUERIES_MAX ? TFB_QUERIES_MAX : n;
}

/* The rows of t->rows[0..n) as a JSON array. */
static int send_rows(struct colibri_response *resp, const struct tfb_world *rows, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        if (json_array_append_new(a, world_json(rows[i].id, rows[i].random_number))) {
            json_decref(a);
            a = NULL;
        }
    }
    return send_json(resp, a);
}

/* n random World rows, each read with its own query. 0 or -1. */
static int read_rows(struct tfb_thread *t, int n)
{
    for (int i = 0; i < n; i++) {
        t->rows[i].id = tfb_random_id(t);
        if (tfb_world_get(t, t->rows[i].id, &t->rows[i].random_number))
            return -1;
    }
    return 0;
}

static int queries(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct tfb_thread *t = tfb_thread();
    int n = queries_param(req);
    if (!t || read_rows(t, n))
        return 500;
    return send_rows(resp, t->rows, n);
}

static int step_done(struct tfb_thread *t, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return 0;
    fprintf(stderr, "techempower: %s: %s\n", sqlite3_sql(st), sqlite3_errmsg(t->db));
    return -1;
}

/* n rows read one by one as /queries does, each given a new randomNumber,
 * then written back in one transaction. The write waits for any other
 * thread's (SQLite has one writer at a time; busy_timeout in db.c). */
static int updates(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct tfb_thread *t = tfb_thread();
    int n = queries_param(req);
    if (!t || read_rows(t, n))
        return 500;
    for (int i = 0; i < n; i++) {
        int old = t->rows[i].random_number; /* a new number, so that every row changes */
        while ((t->rows[i].random_number = tfb_random_id(t)) == old)
            ;
    }
    int r = step_done(t, t->begin);
    for (int i = 0; i < n && !r; i++) {
        sqlite3_bind_int(t->update, 1, t->rows[i].random_number);
        sqlite3_bind_int(t->update, 2, t->rows[i].id);
        r = step_done(t, t->update);
    }
    if (!r)
        r = step_done(t, t->commit);
    if (r) {
        step_done(t, t->rollback);
        return 500;
    }
    return send_rows(resp, t->rows, n);
}

/* Each handler at /NAME. 0 or -1 with err set. */
static int add_routes(struct colibri_server *srv, char *err, size_t errlen)
{
    static const struct colibri_handler handlers[] = {
        {.name = "plaintext", .fn = plaintext},
        {.name = "json", .fn = json},
        {.name = "db", .fn = db},
        {.name = "queries", .fn = queries},
        {.name = "updates", .fn = updates},
        {.name = "fortunes", .fn = tfb_fortunes},
    };
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "/%s", handlers[i].name);
        if (colibri_server_register(srv, &handlers[i]) < 0) {
            snprintf(err, errlen, "cannot register handler %s", handlers[i].name);
            return -1;
        }
        if (colibri_server_route(srv, prefix, handlers[i].name, NULL, err, errlen))
            return -1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: techempower [-t THREADS] [-d DATABASE] [ADDR:PORT]   (default %s)\n",
            SAMPLE_DEFAULT_ADDR);
    return 2;
}

int main(int argc, char **argv)
{
    const char *dbfile = NULL;
    long threads = 0;
    char err[512], temp[4096], *end;
    int c;
    while ((c = getopt(argc, argv, "t:d:")) != -1) {
        if (c == 't') {
            threads = strtol(optarg, &end, 10);
            if (*end || end == optarg || threads < 0 || threads > 1024) {
                fprintf(stderr, "techempower: -t %s: a number of threads, 0..1024\n", optarg);
                return 2;
            }
        } else if (c == 'd') {
            dbfile = optarg;
        } else {
            return usage();
        }
    }
    if (argc - optind > 1)
        return usage();
    const char *addr = optind < argc ? argv[optind] : SAMPLE_DEFAULT_ADDR;
    if (!dbfile && tfb_db_temp(temp, sizeof(temp), err, sizeof(err))) {
        fprintf(stderr, "techempower: %s\n", err);
        return 1;
    }
    const char *path = dbfile ? dbfile : temp;
    struct colibri_server *srv = NULL;
    int r = 1;
    if (tfb_db_setup(path, err, sizeof(err)) || tfb_fortunes_init(err, sizeof(err))) {
        fprintf(stderr, "techempower: %s\n", err);
        goto out;
    }
    if (!(srv = colibri_server_new()))
        goto out;
    colibri_server_set_threads(srv, (unsigned)threads);
    if (add_routes(srv, err, sizeof(err)) || colibri_server_listen(srv, addr, err, sizeof(err))) {
        fprintf(stderr, "techempower: %s\n", err);
        colibri_server_free(srv);
        goto out;
    }
    r = sample_run(srv, "techempower");
out:
    tfb_fortunes_free();
    if (!dbfile)
        tfb_db_remove(temp);
    return r;
}
