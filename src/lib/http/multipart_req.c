/* multipart_req.c - colibri_req_multipart_next(): the body of a
 * multipart/form-data request, read as it arrives (http_body_next), parsed
 * (http/multipart.c) and handed over part by part, small parts in memory
 * (the connection's request-body buffer), larger ones in an unnamed
 * temporary file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "http/multipart.h"
#include "http/request.h"
#include "http/status.h"

#define MULTIPART_MAX_PARTS 1000

struct http_mp {
    struct mp_parser p;
    struct view pending; /* body bytes not fed to the parser yet */
    int fd;              /* the current part's temporary file, or -1 */
    int err;             /* a failure (-errno), returned again by every later call */
    bool done;
};

/* Runs when the handler returns or the connection dies: whatever happens,
 * the temporary file is closed, and with it gone. */
static void mp_cleanup(void *arg)
{
    struct http_mp *m = arg;
    if (m->fd >= 0)
        close(m->fd);
    free(m);
}

int http_temp_file(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
        return fd;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/colibri-upload-XXXXXX", dir) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* A failure is final: later calls return it again. */
static int give_up(struct colibri_request *req, struct http_mp *m, int err)
{
    req->hc->closing = req->hc->lingering = true;
    m->err = err;
    return err;
}

/* The parser's next event, feeding it body bytes as they come. 0, or
 * -errno. At the end of the body, MP_DONE if the close delimiter came. */
static int next_event(struct colibri_request *req, struct http_mp *m, struct mp_event *ev)
{
    for (;;) {
        if (m->pending.len) {
            size_t used = mp_feed(&m->p, m->pending.p, m->pending.len, ev);
            m->pending.p += used;
            m->pending.len -= used;
            if (ev->type != MP_MORE)
                return 0;
            continue;
        }
        int r = http_body_next(req, &m->pending);
        if (r)
            return r;
        if (!m->pending.len) { /* the end of the body */
            ev->type = mp_finish(&m->p) == 0 ? MP_DONE : MP_ERROR;
            return 0;
        }
    }
}

/* A copy of s in the request's arena (NULL stays NULL). */
static const char *keep(struct colibri_request *req, const char *s, bool *ok)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *c = arena_alloc(&req->hc->arena, n);
    if (!c) {
        *ok = false;
        return NULL;
    }
    return memcpy(c, s, n);
}

static int start(struct colibri_request *req)
{
    struct view type;
    char b[MP_BOUNDARY_MAX + 1];
    size_t blen;
    if (!http_header_find(req->head->headers, "Content-Type", 12, &type))
        return -EMEDIUMTYPE;
    int r = mp_boundary(type, b, &blen);
    if (r == -1)
        return -EMEDIUMTYPE;
    if (r < 0)
        return -EBADMSG;
    struct http_mp *m = malloc(sizeof(*m));
    if (!m)
        return -ENOMEM;
    mp_init(&m->p, b, blen, MULTIPART_MAX_PARTS);
    m->pending = (struct view){.p = "", .len = 0};
    m->fd = -1;
    m->err = 0;
    m->done = false;
    if (colibri_defer(req, mp_cleanup, m) < 0)
        return -ENOMEM; /* it ran already */
    req->mp = m;
    return 0;
}

/* colibri_req_multipart_next() with -errno for its failures. */
static int multipart_next(struct colibri_request *req, struct colibri_part *part)
{
    if (!(req->needs & COLIBRI_NEED_BODY_STREAM))
        return -EINVAL;
    int r;
    if (!req->mp && (r = start(req)))
        return r;
    struct http_mp *m = req->mp;
    if (m->err)
        return m->err;
    if (m->done)
        return 0;
    if (m->fd >= 0) {
        close(m->fd);
        m->fd = -1;
    }
    struct strbuf *mem = &req->hc->reqbody;
    strbuf_reset(mem);
    const size_t mem_max = req->cfg->multipart_memory_max;
    bool in_part = false, ok = true;
    uint64_t size = 0;
    for (;;) {
        struct mp_event ev;
        if ((r = next_event(req, m, &ev)))
            return give_up(req, m, r);
        switch (ev.type) {
        case MP_PART:
            *part = (struct colibri_part){
                .name = keep(req, m->p.name, &ok),
                .filename = keep(req, m->p.filename, &ok),
                .content_type = keep(req, m->p.content_type, &ok),
                .fd = -1,
            };
            if (!ok)
                return give_up(req, m, -ENOMEM);
            in_part = true;
            break;
        case MP_DATA:
            size += ev.len;
            if (m->fd < 0 && mem->len + ev.len <= mem_max) {
                if (strbuf_append(mem, ev.data, ev.len) < 0)
                    return give_up(req, m, -ENOMEM);
                break;
            }
            if (m->fd < 0) {
                if ((m->fd = http_temp_file(req->cfg->temp_dir)) < 0) {
                    int e = -errno;
                    LOG_LIMITED(LOG_ERROR, "temp_dir %s: cannot create a file: %s",
                                req->cfg->temp_dir, strerror(-e));
                    return give_up(req, m, e);
                }
                if (write_full(m->fd, mem->buf, mem->len) < 0)
                    goto out_write;
                strbuf_reset(mem);
            }
            if (write_full(m->fd, ev.data, ev.len) < 0)
                goto out_write;
            break;
        case MP_PART_END:
            if (!in_part)
                return give_up(req, m, -EBADMSG);
            part->size = size;
            if (m->fd >= 0) {
                if (lseek(m->fd, 0, SEEK_SET) < 0)
                    goto out_write;
                part->fd = m->fd;
            } else {
                part->data = mem->buf ? mem->buf : "";
            }
            return 1;
        case MP_DONE: {
            /* the epilogue: read to the end of the body, for the next request */
            struct view rest;
            do {
                if ((r = http_body_next(req, &rest)))
                    return give_up(req, m, r);
            } while (rest.len);
            m->done = true;
            return 0;
        }
        case MP_ERROR:
        default:
            return give_up(req, m, -EBADMSG);
        case MP_MORE:
            break;
        }
    }

out_write:;
    int e = errno ? -errno : -EIO;
    LOG_LIMITED(LOG_ERROR, "temp_dir %s: cannot write an upload: %s", req->cfg->temp_dir,
                strerror(-e));
    return give_up(req, m, e);
}

int colibri_req_multipart_next(struct colibri_request *req, struct colibri_part *part)
{
    /* 1 and 0 as they are; a failure as the status it answers with */
    int r = multipart_next(req, part);
    return r < 0 ? http_status_of(r) : r;
}
