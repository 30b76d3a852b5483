/* pubsub.h - what the rest of http/ needs of a subscription (pubsub.c):
 * a wait that also ends when the subscription has something for the
 * handler (ws.c uses it for colibri_ws_read_sub). */
#pragma once

struct colibri_sub;

/* conn_wait_fd() on the subscriber's connection that also ends, with
 * CONN_WOKEN, when sub has a message or an error; CONN_WOKEN at once when
 * it has one already. */
int ps_wait_fd(struct colibri_sub *sub, int fd, unsigned events, int timeout_ms);
