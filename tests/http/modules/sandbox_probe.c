/* sandbox_probe.c - a "module FILE" library for tests/http/test_sandbox.py:
 * handlers that try what "sandbox = true" must refuse, and say what
 * happened. Built like greet.c (colibri.h alone, no -lcolibri).
 *
 * Handlers (each answers one line):
 *   probe_open    opens ?path= for reading: "ok" or "errno N"
 *   probe_socket  socket(AF_INET, SOCK_STREAM): "ok" or "errno N"
 *   probe_fork    fork() (the child exits at once): "ok" or "errno N"
 *   probe_thread  asks the module's own thread, started by
 *                 colibri_module_init() (so before the sandbox closed), to
 *                 open ?path=: "ok" or "errno N" as that thread saw it
 *   probe_thread_socket  the same thread calls socket()
 * That thread blocks every signal but SIGSYS and SIGRTMIN+7, as the
 * server's helper threads do (README, "Sandbox"), and runs until the
 * process ends: the test links the library with -z nodelete, so that the
 * server's dlclose() at exit leaves its code in place. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "colibri.h"

static int path_of(struct colibri_request *req, char *buf, size_t len)
{
    struct colibri_str v;
    if (!colibri_req_query(req, "path", &v) || !v.len || v.len >= len)
        return -1;
    /* the query is raw: the tests send plain paths */
    memcpy(buf, v.p, v.len);
    buf[v.len] = '\0';
    return 0;
}

static int try_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static int try_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static int answer(struct colibri_response *resp, int e)
{
    colibri_resp_set_type(resp, "text/plain");
    if (e)
        colibri_resp_printf(resp, "errno %d\n", e);
    else
        colibri_resp_append(resp, "ok\n", 3);
    return 200;
}

static int probe_open(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    char path[512];
    if (path_of(req, path, sizeof(path)) < 0)
        return 400;
    return answer(resp, try_open(path));
}

static int probe_fork(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int e = pid < 0 ? errno : 0;
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return answer(resp, e);
}

static int probe_socket(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    return answer(resp, try_socket());
}

/* The module's thread: opens what it is given, one path at a time. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char path[512]; /* "": socket() instead */
    int result;     /* -1: asked, not yet answered */
    bool asked;
} job = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", 0, false};
static bool thread_started;

static void *opener(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&job.mu);
    for (;;) {
        while (!job.asked)
            pthread_cond_wait(&job.cond, &job.mu);
        job.result = job.path[0] ? try_open(job.path) : try_socket();
        job.asked = false;
        pthread_cond_broadcast(&job.cond);
    }
    return NULL;
}

/* What the module's thread says to path ("": socket()). */
static int ask_thread(const char *path)
{
    pthread_mutex_lock(&job.mu);
    while (job.asked) /* another request's turn */
        pthread_cond_wait(&job.cond, &job.mu);
    snprintf(job.path, sizeof(job.path), "%s", path);
    job.result = -1;
    job.asked = true;
    pthread_cond_broadcast(&job.cond);
    while (job.result < 0)
        pthread_cond_wait(&job.cond, &job.mu);
    int e = job.result;
    pthread_mutex_unlock(&job.mu);
    return e;
}

static int probe_thread(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    char path[512];
    if (path_of(req, path, sizeof(path)) < 0)
        return 400;
    return answer(resp, ask_thread(path));
}

static int probe_thread_socket(struct colibri_request *req, struct colibri_response *resp,
                               void *data)
{
    (void)req;
    (void)data;
    return answer(resp, ask_thread(""));
}

int colibri_module_init(struct colibri_server *srv)
{
    static const struct colibri_handler handlers[] = {
        {.name = "probe_open", .fn = probe_open},
        {.name = "probe_socket", .fn = probe_socket},
        {.name = "probe_thread", .fn = probe_thread},
        {.name = "probe_thread_socket", .fn = probe_thread_socket},
        {.name = "probe_fork", .fn = probe_fork},
    };
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
        int r = colibri_server_register(srv, &handlers[i]);
        if (r)
            return r;
    }
    if (!thread_started) { /* once: a reload calls this again */
        /* the server's signals stay with the server's threads */
        sigset_t set, old;
        sigfillset(&set);
        sigdelset(&set, SIGSYS);
        sigdelset(&set, SIGRTMIN + 7);
        pthread_sigmask(SIG_BLOCK, &set, &old);
        pthread_t t;
        int r = pthread_create(&t, NULL, opener, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r)
            return r;
        pthread_detach(t);
        thread_started = true;
    }
    return 0;
}
