/* tfb.h - the TechEmpower sample's parts: the database (db.c), the
 * fortunes page (fortunes.c) and the handlers and main() (main.c). */
#pragma once

#include <colibri.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

#define TFB_WORLD_ROWS  10000 /* World ids are 1..10000, randomNumber 1..10000 */
#define TFB_QUERIES_MAX 500   /* /queries and /updates: at most this many rows */

struct tpl_scratch;

struct tfb_world {
    int id;
    int random_number;
};

/* What one worker thread keeps from one request to the next: its own
 * SQLite connection with its statements prepared, its random numbers, and
 * the buffers of the fortunes page. Made on the thread's first request,
 * released when the thread ends. */
struct tfb_thread {
    sqlite3 *db;
    sqlite3_stmt *world;    /* SELECT randomNumber FROM World WHERE id = ?1 */
    sqlite3_stmt *update;   /* UPDATE World SET randomNumber = ?1 WHERE id = ?2 */
    sqlite3_stmt *fortunes; /* SELECT id, message FROM Fortune */
    sqlite3_stmt *begin, *commit, *rollback;
    uint64_t rng;
    struct tfb_world rows[TFB_QUERIES_MAX];
    struct tpl_scratch *scratch;
    struct strbuf text; /* the fortunes' messages, NUL-separated */
    struct strbuf page; /* the rendered fortunes page */
    void *fortunes_rows;
    size_t fortunes_cap;
};

/* Creates the database at path if needed (tables World and Fortune, filled
 * when empty) and checks that the statements compile against it. 0, or -1
 * with a message in err. path must stay valid while the server runs. */
int tfb_db_setup(const char *path, char *err, size_t errlen);
/* A fresh directory under $TMPDIR (else /tmp) with path naming world.db in
 * it, for a database that lives as long as the process; tfb_db_remove()
 * deletes it (with SQLite's -wal and -shm files). 0 or -1 with err set. */
int tfb_db_temp(char *path, size_t len, char *err, size_t errlen);
void tfb_db_remove(const char *path);

/* The calling thread's state, opened on first use; NULL (logged) when the
 * database cannot be opened: the handler answers 500. */
struct tfb_thread *tfb_thread(void);
/* 1..TFB_WORLD_ROWS, uniformly. */
int tfb_random_id(struct tfb_thread *t);
/* randomNumber of World row id into *out: 0, or -1 (logged). */
int tfb_world_get(struct tfb_thread *t, int id, int *out);

/* The fortunes page: compiled once at start (0, or -1 with err set), the
 * handler, and the template freed at exit. */
int tfb_fortunes_init(char *err, size_t errlen);
void tfb_fortunes_free(void);
int tfb_fortunes(struct colibri_request *req, struct colibri_response *resp, void *data);
/* Frees what fortunes.c keeps in a thread's state. */
void tfb_fortunes_thread_free(struct tfb_thread *t);
