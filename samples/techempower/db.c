/* db.c - the TechEmpower database in SQLite: created and filled at start,
 * then one connection per worker thread. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tfb.h"

/* The twelve fortunes of the benchmark (the thirteenth is added to every
 * answer at request time). */
static const char *const fortunes[] = {
    "fortune: No such file or directory",
    "A computer scientist is someone who fixes things that aren't broken.",
    "After enough decimal places, nobody gives a damn.",
    "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    "A computer program does what you tell it to do, not what you want it to do.",
    "Emacs is a nice operating system, but I prefer UNIX. \xe2\x80\x94 Tom Christaensen",
    "Any program that runs right is obsolete.",
    "A list is only as strong as its weakest link. \xe2\x80\x94 Donald Knuth",
    "Feature: A bug with seniority.",
    "Computers make very fast, very accurate mistakes.",
    "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
    "\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0\xe3\x83\xaf\xe3\x83\xbc\xe3\x82\xaf\xe3\x81"
    "\xae\xe3\x83\x99\xe3\x83\xb3\xe3\x83\x81\xe3\x83\x9e\xe3\x83\xbc\xe3\x82\xaf",
};

static const char *db_path; /* set by tfb_db_setup(), read by every thread */
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
        s = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&s;
    return s;
}

int tfb_random_id(struct tfb_thread *t)
{
    return 1 + (int)(splitmix64(&t->rng) % TFB_WORLD_ROWS);
}

static int failed(sqlite3 *db, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s: %s", db_path, what, db ? sqlite3_errmsg(db) : "out of memory");
    return -1;
}

static int exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : failed(db, sql, err, errlen);
}

static int open_db(const char *path, int flags, sqlite3 **db, char *err, size_t errlen)
{
    /* NOMUTEX: each connection is used by its own thread alone */
    if (sqlite3_open_v2(path, db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return failed(*db, "open", err, errlen);
    sqlite3_busy_timeout(*db, 5000); /* writers take turns: see README */
    return exec(*db, "PRAGMA synchronous = NORMAL", err, errlen);
}

static long count(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int insert_rows(sqlite3 *db, const char *sql, int n, bool world, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    uint64_t rng = seed();
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return failed(db, sql, err, errlen);
    int r = 0;
    for (int i = 0; i < n && !r; i++) {
        sqlite3_bind_int(st, 1, i + 1);
        if (world)
            sqlite3_bind_int(st, 2, 1 + (int)(splitmix64(&rng) % TFB_WORLD_ROWS));
        else
            sqlite3_bind_text(st, 2, fortunes[i], -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            r = failed(db, sql, err, errlen);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return r;
}

static int prepare_all(struct tfb_thread *t, char *err, size_t errlen)
{
    static const struct {
        size_t off;
        const char *sql;
    } stmts[] = {
        {offsetof(struct tfb_thread, world), "SELECT randomNumber FROM World WHERE id = ?1"},
        {offsetof(struct tfb_thread, update), "UPDATE World SET randomNumber = ?1 WHERE id = ?2"},
        {offsetof(struct tfb_thread, fortunes), "SELECT id, message FROM Fortune"},
        {offsetof(struct tfb_thread, begin), "BEGIN IMMEDIATE"},
        {offsetof(struct tfb_thread, commit), "COMMIT"},
        {offsetof(struct tfb_thread, rollback), "ROLLBACK"},
    };
    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
        sqlite3_stmt **st = (sqlite3_stmt **)((char *)t + stmts[i].off);
        if (sqlite3_prepare_v3(t->db, stmts[i].sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
            SQLITE_OK)
            return failed(t->db, stmts[i].sql, err, errlen);
    }
    return 0;
}

static void finalize_all(struct tfb_thread *t)
{
    sqlite3_stmt *stmts[] = {t->world, t->update, t->fortunes, t->begin, t->commit, t->rollback};
    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++)
        sqlite3_finalize(stmts[i]);
}

static void thread_free(void *p)
{
    struct tfb_thread *t = p;
    if (!t)
        return;
    finalize_all(t);
    sqlite3_close(t->db);
    tfb_fortunes_thread_free(t);
    free(t);
}

static void make_key(void)
{
    if (pthread_key_create(&thread_key, thread_free))
        abort();
}

int tfb_db_setup(const char *path, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    db_path = path;
    pthread_once(&key_once, make_key);
    int r = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db, err, errlen);
    /* WAL: readers never wait for the writer, nor it for them */
    if (!r)
        r = exec(db, "PRAGMA journal_mode = WAL", err, errlen);
    if (!r)
        r = exec(db,
                 "CREATE TABLE IF NOT EXISTS World (id INTEGER PRIMARY KEY,"
                 " randomNumber INTEGER NOT NULL);"
                 "CREATE TABLE IF NOT EXISTS Fortune (id INTEGER PRIMARY KEY,"
                 " message TEXT NOT NULL)",
                 err, errlen);
    if (!r)
        r = exec(db, "BEGIN", err, errlen);
    if (!r && count(db, "SELECT count(*) FROM World") == 0)
        r = insert_rows(db, "INSERT INTO World (id, randomNumber) VALUES (?1, ?2)", TFB_WORLD_ROWS,
                        true, err, errlen);
    if (!r && count(db, "SELECT count(*) FROM Fortune") == 0)
        r = insert_rows(db, "INSERT INTO Fortune (id, message) VALUES (?1, ?2)",
                        (int)(sizeof(fortunes) / sizeof(fortunes[0])), false, err, errlen);
    if (!r)
        r = exec(db, "COMMIT", err, errlen);
    /* a database of another shape fails now, not at the first request */
    if (!r &&
        count(db, "SELECT count(*) FROM World WHERE id BETWEEN 1 AND 10000") != TFB_WORLD_ROWS) {
        snprintf(err, errlen, "%s: table World must have the rows 1..%d", path, TFB_WORLD_ROWS);
        r = -1;
    }
    if (!r) {
        struct tfb_thread *t = calloc(1, sizeof(*t));
        if (!t) {
            r = failed(NULL, "checking the statements", err, errlen);
        } else {
            t->db = db;
            r = prepare_all(t, err, errlen);
            finalize_all(t);
            free(t);
        }
    }
    sqlite3_close(db);
    return r;
}

struct tfb_thread *tfb_thread(void)
{
    struct tfb_thread *t = pthread_getspecific(thread_key);
    if (t)
        return t;
    char err[512];
    t = calloc(1, sizeof(*t));
    if (!t) {
        fprintf(stderr, "techempower: out of memory\n");
        return NULL;
    }
    t->rng = seed();
    if (open_db(db_path, SQLITE_OPEN_READWRITE, &t->db, err, sizeof(err)) ||
        prepare_all(t, err, sizeof(err)) || pthread_setspecific(thread_key, t)) {
        fprintf(stderr, "techempower: %s\n", err);
        thread_free(t);
        return NULL;
    }
    return t;
}

int tfb_world_get(struct tfb_thread *t, int id, int *out)
{
    sqlite3_bind_int(t->world, 1, id);
    int rc = sqlite3_step(t->world);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(t->world, 0);
    else
        fprintf(stderr, "techempower: World %d: %s\n", id, sqlite3_errmsg(t->db));
    sqlite3_reset(t->world);
    return rc == SQLITE_ROW ? 0 : -1;
}

int tfb_db_temp(char *path, size_t len, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/colibri-techempower.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if ((size_t)snprintf(path, len, "%s/world.db", dir) >= len) {
        rmdir(dir);
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return 0;
}

void tfb_db_remove(const char *path)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char p[4096 + 16];
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
        unlink(p);
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        snprintf(p, sizeof(p), "%.*s", (int)(slash - path), path);
        rmdir(p);
    }
}
