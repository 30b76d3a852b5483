/* sample.c - the graceful run the samples share. */
#include "sample.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct colibri_server *running;

static void stop(int sig)
{
    (void)sig;
    colibri_server_shutdown(running); /* async-signal-safe */
}

int sample_run(struct colibri_server *srv, const char *name)
{
    char err[256];
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop;
    sigemptyset(&sa.sa_mask);
    running = srv;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int r = colibri_server_run(srv, err, sizeof(err));
    if (r)
        fprintf(stderr, "%s: %s\n", name, err);
    sa.sa_handler = SIG_IGN; /* a second Ctrl-C must not reach a freed server */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    colibri_server_free(srv);
    running = NULL;
    return r ? 1 : 0;
}
