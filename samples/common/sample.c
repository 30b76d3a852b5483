/* sample.c - the graceful run the samples share: SIGINT and SIGTERM stop
 * the server gracefully, taken by the server itself
 * (colibri_server_take_signals: no handler, the signals are read by its
 * control thread). */
#include "sample.h"

#include <stdio.h>

int sample_run(struct colibri_server *srv, const char *name)
{
    char err[256] = "";
    int r = colibri_server_take_signals(srv, err, sizeof(err));
    if (!r)
        r = colibri_server_run(srv, err, sizeof(err));
    if (r)
        fprintf(stderr, "%s: %s\n", name, err);
    colibri_server_free(srv);
    return r ? 1 : 0;
}
