/* sample.h - what the samples share: running a server until Ctrl-C. */
#pragma once

#include <colibri.h>

/* The address a sample listens on when its command line names none. */
#define SAMPLE_DEFAULT_ADDR "127.0.0.1:8080"

/* Runs srv until SIGINT or SIGTERM (a graceful stop: requests in flight,
 * event streams included, finish), then frees it. Errors are printed
 * behind "name: ". Returns the exit status for main(): 0 or 1. */
int sample_run(struct colibri_server *srv, const char *name);
