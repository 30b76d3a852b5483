/* test_signals.c - a server that takes its signals (colibri_server_take_signals)
 * answers them from its control thread, and one sent before it runs waits
 * and is answered once it does (with a handler, a signal that came too
 * early, or at a moment a sanitizer's runtime deferred it, was lost).
 * alarm() bounds each run: a signal never answered kills the test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "colibri.h"
#include "test.h"

static int reloads;

static int on_reload(struct colibri_server *next, void *arg, char *err, size_t errlen)
{
    (void)next;
    (void)err;
    (void)errlen;
    reloads++;
    /* the reload was answered: now a stop, sent as a user would */
    (void)arg;
    kill(getpid(), SIGTERM);
    return 0;
}

TEST(term_before_run_stops_it)
{
    char err[256] = "";
    struct colibri_server *srv = colibri_server_new();
    CHECK(srv != NULL);
    CHECK_EQ_INT(colibri_server_take_signals(srv, err, sizeof(err)), 0);
    CHECK_EQ_INT(colibri_server_listen(srv, "127.0.0.1:0", err, sizeof(err)), 0);
    kill(getpid(), SIGTERM); /* blocked: it waits for the server */
    alarm(20);
    CHECK_EQ_INT(colibri_server_run(srv, err, sizeof(err)), 0);
    alarm(0);
    colibri_server_free(srv);
}

TEST(hup_before_run_reloads_then_term_stops)
{
    char path[] = "/tmp/colibri-signals-XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char conf[] =
        "listener 127.0.0.1:0\nthreads = 1\nsite {\n    handler /hello hello_world\n}\n";
    CHECK(write(fd, conf, sizeof(conf) - 1) == (ssize_t)(sizeof(conf) - 1));
    close(fd);
    struct colibri_server *srv = colibri_server_new();
    CHECK(srv != NULL);
    CHECK_EQ_INT(colibri_server_load_config(srv, path, err, sizeof(err)), 0);
    colibri_server_on_reload(srv, on_reload, NULL);
    CHECK_EQ_INT(colibri_server_take_signals(srv, err, sizeof(err)), 0);
    kill(getpid(), SIGHUP); /* would end the process if it were not taken */
    alarm(20);
    CHECK_EQ_INT(colibri_server_run(srv, err, sizeof(err)), 0);
    alarm(0);
    CHECK_EQ_INT(reloads, 1);
    colibri_server_free(srv);
    unlink(path);
}

int main(void)
{
    RUN(term_before_run_stops_it);
    RUN(hup_before_run_reloads_then_term_stops);
    return test_summary();
}
