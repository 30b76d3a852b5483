/* load_tls.c - the config's TLS lines into a server: tls_protocols and
 * tls_ticket_key_file (top level), tls_certificate/tls_key pairs and
 * tls_ocsp_staple (in a site). Called by load.c as it meets them. */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "config/config.h"
#include "rt/tls.h"
#include "server/server.h"

int load_tls_protocols(struct colibri_server *srv, struct config_node *n, char *err, size_t errlen)
{
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", n->value);
    for (char *save, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (!strcmp(w, "TLSv1.2"))
            mask |= TLS_PROTO_V12;
        else if (!strcmp(w, "TLSv1.3"))
            mask |= TLS_PROTO_V13;
        else if (!strcmp(w, "TLSv1") || !strcmp(w, "TLSv1.1") || !strcmp(w, "SSLv3"))
            return config_error(n, err, errlen,
                                "%s is refused: it is no longer safe (use TLSv1.2 "
                                "and TLSv1.3)",
                                w);
        else
            return config_error(n, err, errlen, "unknown protocol '%s' (expected TLSv1.2, TLSv1.3)",
                                w);
    }
    if (!mask)
        return config_error(n, err, errlen, "expected TLSv1.2 and/or TLSv1.3");
    srv->tls_protocols = mask;
    return 0;
}

/* A path as written, or taken from the config file's folder when relative
 * (as for "module"). */
static int config_path_of(const struct config_node *n, char *path, size_t len)
{
    char dir[PATH_MAX];
    if (n->value[0] == '/' || !n->file || !strchr(n->file, '/'))
        return snprintf(path, len, "%s", n->value) >= (int)len ? -ENAMETOOLONG : 0;
    snprintf(dir, sizeof(dir), "%s", n->file);
    return snprintf(path, len, "%s/%s", dirname(dir), n->value) >= (int)len ? -ENAMETOOLONG : 0;
}

/* "tls_certificate = FILE" then "tls_key = FILE" in a site: a pair for
 * that site's TLS context (several pairs: one per key type). The site's
 * names are its section's value; the default site answers without SNI. */
int load_tls_pair(struct colibri_server *srv, struct config_node *site, struct config_node *n,
                  char *err, size_t errlen)
{
    if (!strcmp(n->name, "tls_key"))
        return config_error(n, err, errlen, "must follow a tls_certificate line");
    struct config_node *k = n->next;
    while (k && k->used && strcmp(k->name, "tls_key"))
        k = k->next;
    if (!k || strcmp(k->name, "tls_key") || k->used)
        return config_error(n, err, errlen, "needs a tls_key line after it");
    k->used = true;
    if (!tls_available())
        return config_error(n, err, errlen,
                            "this build has no TLS (OpenSSL 3 was not found at build time)");
    char cert[PATH_MAX], key[PATH_MAX], why[512];
    if (config_path_of(n, cert, sizeof(cert)) || config_path_of(k, key, sizeof(key)))
        return config_error(n, err, errlen, "path too long");
    if (sandbox_allow(srv, cert, COLIBRI_PATH_READ, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    if (sandbox_allow(srv, key, COLIBRI_PATH_READ, why, sizeof(why)))
        return config_error(k, err, errlen, "%s", why);
    if (!srv->tls) { /* the first certificate: the server-wide settings, once */
        if (!(srv->tls = tls_server_new(srv->tls_protocols, srv->tls_ciphers, why, sizeof(why))))
            return config_error(n, err, errlen, "%s", why);
        tls_server_tickets(srv->tls, !srv->tls_no_tickets);
        if ((srv->tls_ticket_rotate || srv->has_ticket_key) &&
            tls_server_ticket_keys(srv->tls, srv->tls_ticket_rotate,
                                   srv->has_ticket_key ? srv->tls_ticket_key : NULL) < 0)
            return config_error(n, err, errlen, "out of memory");
        tls_server_ktls(srv->tls, !srv->ktls_off && tls_ktls_probe(NULL));
    }
    if (srv->tls_site_of != site) {
        /* the site's names, each a word of its section's value */
        char names[1024];
        const char *list[32];
        unsigned count = 0;
        snprintf(names, sizeof(names), "%s", site->value);
        for (char *save, *w = strtok_r(names, " \t", &save); w && count < 32;
             w = strtok_r(NULL, " \t", &save)) {
            for (char *c = w; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            list[count++] = w;
        }
        int r = tls_server_add_site(srv->tls, list, count, count == 0, why, sizeof(why));
        if (r < 0)
            return config_error(n, err, errlen, "%s", why);
        srv->tls_site = r;
        srv->tls_site_of = site;
    }
    bool expired;
    if (tls_server_add_pair(srv->tls, srv->tls_site, cert, key, &expired, why, sizeof(why)))
        return config_error(strstr(why, key) == why ? k : n, err, errlen, "%s", why);
    if (expired)
        log_msg(LOG_WARN, "%s:%d: tls_certificate: %s has expired (loaded all the same)", n->file,
                n->line, cert);
    return 0;
}

/* "tls_ticket_key_file = FILE": exactly 80 bytes (name, HMAC key, AES
 * key), read at every load, so a reload takes a new one. */
int load_ticket_key(struct colibri_server *srv, struct config_node *n, char *err, size_t errlen)
{
    char path[PATH_MAX], why[512];
    if (config_path_of(n, path, sizeof(path)))
        return config_error(n, err, errlen, "path too long");
    if (sandbox_allow(srv, path, COLIBRI_PATH_READ, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    struct stat st;
    int fd = open_regular(path, &st), r = fd;
    if (fd >= 0 && st.st_size != 80) {
        close(fd);
        return config_error(n, err, errlen, "%s: must hold exactly 80 bytes (it has %s%lld)", path,
                            st.st_size > 80 ? "more than " : "",
                            st.st_size > 80 ? 80LL : (long long)st.st_size);
    }
    if (fd >= 0) {
        r = pread_full(fd, srv->tls_ticket_key, 80, 0);
        close(fd);
    }
    if (r < 0)
        return config_error(n, err, errlen, "%s: %s", path,
                            r == -EINVAL ? "not a regular file" : strerror(-r));
    srv->has_ticket_key = true;
    return 0;
}

/* "tls_ocsp_staple = FILE" in a site, after its tls_certificate. */
int load_tls_staple(struct colibri_server *srv, struct config_node *site, struct config_node *n,
                    char *err, size_t errlen)
{
    char path[PATH_MAX], why[512];
    if (srv->tls_site_of != site)
        return config_error(n, err, errlen, "needs a tls_certificate line before it in the site");
    if (config_path_of(n, path, sizeof(path)))
        return config_error(n, err, errlen, "path too long");
    if (sandbox_allow(srv, path, COLIBRI_PATH_READ, why, sizeof(why)) ||
        tls_server_add_staple(srv->tls, srv->tls_site, path, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    return 0;
}
