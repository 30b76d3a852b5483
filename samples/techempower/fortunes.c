/* fortunes.c - /fortunes: every row of Fortune and one more added at
 * request time, sorted by message, as an HTML table rendered with
 * colibri's Mustache engine (src/lib/tpl, the struct binding: the names in
 * the template are checked against the C structs when it compiles, and
 * {{message}} is HTML-escaped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/coro.h"
#include "tfb.h"
#include "tpl/tpl.h"

struct fortune {
    int id;
    const char *message;
};

struct fortunes_page {
    struct fortune *rows;
    size_t n;
};

static void gen_fortunes(struct coro *coro, const void *parent, void *item)
{
    const struct fortunes_page *p = parent;
    for (size_t i = 0; i < p->n; i++) {
        *(struct fortune *)item = p->rows[i];
        coro_yield(coro, 0);
    }
}

static const struct tpl_desc fortune_desc =
    TPL_DESC(struct fortune, TPL_FIELD(struct fortune, id), TPL_FIELD(struct fortune, message));
static const struct tpl_desc page_desc =
    TPL_DESC(struct fortunes_page, TPL_SEQ("fortunes", gen_fortunes, fortune_desc));

static const char page_template[] =
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "{{#fortunes}}<tr><td>{{id}}</td><td>{{message}}</td></tr>{{/fortunes}}"
    "</table></body></html>";

static const char extra_fortune[] = "Additional fortune added at request time.";

static struct tpl *page_tpl;

int tfb_fortunes_init(char *err, size_t errlen)
{
    page_tpl = tpl_compile("fortunes", page_template, sizeof(page_template) - 1, &page_desc, NULL,
                           err, errlen);
    return page_tpl ? 0 : -1;
}

void tfb_fortunes_free(void)
{
    tpl_free(page_tpl);
    page_tpl = NULL;
}

void tfb_fortunes_thread_free(struct tfb_thread *t)
{
    tpl_scratch_free(t->scratch);
    strbuf_free(&t->text);
    strbuf_free(&t->page);
    free(t->fortunes_rows);
}

static int by_message(const void *a, const void *b)
{
    return strcmp(((const struct fortune *)a)->message, ((const struct fortune *)b)->message);
}

/* Every row into t's buffers, the extra one last; the messages are copied
 * (SQLite's text lives only until the next step). 0 or -1. */
static int load(struct tfb_thread *t, struct fortunes_page *page)
{
    struct fortune *rows = t->fortunes_rows;
    size_t n = 0;
    int rc;
    strbuf_reset(&t->text);
    while ((rc = sqlite3_step(t->fortunes)) == SQLITE_ROW) {
        if (n + 1 >= t->fortunes_cap) { /* room for this row and the extra one */
            size_t cap = t->fortunes_cap ? 2 * t->fortunes_cap : 16;
            struct fortune *grown = realloc(rows, cap * sizeof(*rows));
            if (!grown)
                break;
            t->fortunes_rows = rows = grown;
            t->fortunes_cap = cap;
        }
        const char *msg = (const char *)sqlite3_column_text(t->fortunes, 1);
        /* the offset now, the pointer once the buffer stops moving */
        rows[n].id = sqlite3_column_int(t->fortunes, 0);
        rows[n].message = (const char *)(uintptr_t)t->text.len;
        if (strbuf_append(&t->text, msg ? msg : "", msg ? strlen(msg) + 1 : 1) < 0)
            break;
        n++;
    }
    sqlite3_reset(t->fortunes);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "techempower: Fortune: %s\n",
                rc == SQLITE_ROW ? "out of memory" : sqlite3_errmsg(t->db));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        rows[i].message = t->text.buf + (uintptr_t)rows[i].message;
    if (!rows) /* an empty table: room for the extra one */
        t->fortunes_rows = rows = malloc(sizeof(*rows)), t->fortunes_cap = 1;
    if (!rows)
        return -1;
    rows[n++] = (struct fortune){.id = 0, .message = extra_fortune};
    qsort(rows, n, sizeof(*rows), by_message);
    *page = (struct fortunes_page){.rows = rows, .n = n};
    return 0;
}

int tfb_fortunes(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    struct tfb_thread *t = tfb_thread();
    struct fortunes_page page;
    char err[256];
    if (!t || load(t, &page))
        return 500;
    if (!t->scratch && !(t->scratch = tpl_scratch_new()))
        return 500;
    strbuf_reset(&t->page);
    if (tpl_render(page_tpl, &page, &t->page, t->scratch, err, sizeof(err))) {
        fprintf(stderr, "techempower: fortunes: %s\n", err);
        return 500;
    }
    /* sent from the buffer without a copy: it only has to outlive the call */
    return colibri_resp_send_static(resp, 200, "text/html; charset=utf-8", t->page.buf,
                                    t->page.len);
}
