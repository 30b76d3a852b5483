#include "test.h"

#include <string.h>

#include "files/mime.h"

static const char *mime(const char *name)
{
    return files_mime_type(name, strlen(name));
}

TEST(common_types)
{
    /* in /etc/mime.types and in the built-in list alike */
    CHECK_EQ_STR(mime("index.html"), "text/html");
    CHECK_EQ_STR(mime("a/b/c.css"), "text/css");
    CHECK_EQ_STR(mime("app.js"), "text/javascript");
    CHECK_EQ_STR(mime("app.mjs"), "text/javascript");
    CHECK_EQ_STR(mime("data.json"), "application/json");
    CHECK_EQ_STR(mime("logo.png"), "image/png");
    CHECK_EQ_STR(mime("photo.jpeg"), "image/jpeg");
    CHECK_EQ_STR(mime("x.wasm"), "application/wasm");
    CHECK_EQ_STR(mime("font.woff2"), "font/woff2");
}

TEST(case_and_extensions)
{
    CHECK_EQ_STR(mime("INDEX.HTML"), "text/html");
    CHECK_EQ_STR(mime("Logo.PnG"), "image/png");
    CHECK_EQ_STR(mime("archive.tar.gz"), "application/gzip"); /* the longest known suffix */
    CHECK_EQ_STR(mime("v1.2.3.txt"), "text/plain");
}

TEST(no_type)
{
    CHECK_EQ_STR(mime("README"), "application/octet-stream");
    CHECK_EQ_STR(mime(".html"), "application/octet-stream"); /* a dot file, no extension */
    CHECK_EQ_STR(mime("name."), "application/octet-stream");
    CHECK_EQ_STR(mime("dir.html/file"), "application/octet-stream");
    CHECK_EQ_STR(mime("x.nosuchextension"), "application/octet-stream");
    CHECK_EQ_STR(mime(""), "application/octet-stream");
    char longext[80] = "f.";
    memset(longext + 2, 'a', 70);
    CHECK_EQ_STR(mime(longext), "application/octet-stream");
    /* only len bytes count */
    CHECK_EQ_STR(files_mime_type("a.png.html", 5), "image/png");
}

int main(void)
{
    RUN(common_types);
    RUN(case_and_extensions);
    RUN(no_type);
    return test_summary();
}
