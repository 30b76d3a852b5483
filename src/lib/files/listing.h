/* listing.h - HTML directory listings, rendered by the template engine.
 *
 * The template is compiled once (files_listing_new) and rendered per
 * directory version; names are HTML-escaped by the template and
 * percent-encoded in links, sorted (directories first, then by bytes),
 * with sizes, modification dates and a parent link. Names starting with a
 * dot are left out.
 *
 * A compiled listing is read-only: any thread may render with it.
 */
#pragma once

#include <stddef.h>
#include <sys/stat.h>

struct strbuf;
struct files_listing;

/* Decides about a symbolic link in the listed directory: 0 with st filled
 * (the target's) to list it, or -errno to leave it out. */
typedef int files_link_fn(void *ctx, const char *name, struct stat *st);

/* NULL and a message in err on failure. */
struct files_listing *files_listing_new(char *err, size_t errlen);
void files_listing_free(struct files_listing *l);

/* Appends the listing of the directory dfd (still the caller's) to out;
 * url (len bytes, decoded, ending in '/') is its path for the title and
 * the parent link. Links go to link_fn, which may be NULL (links left out).
 * Returns 0 or -errno. */
int files_listing_render(const struct files_listing *l, int dfd, const char *url, size_t len,
                         files_link_fn *link_fn, void *link_ctx, struct strbuf *out);
