# Generates gen/mime_table.h from a mime.types file ("type ext ext ..."):
#   MIME("css", "text/css") ...  sorted by extension (bytes, lower case),
# the first type named for an extension wins. Without IN, a short list.
cmake_minimum_required(VERSION 3.18)
set(pairs)
if(EXISTS "${IN}")
  file(STRINGS "${IN}" lines REGEX "^[^#]")
  set(source "${IN}")
else()
  set(lines
      "text/html html htm" "text/plain txt" "text/css css" "text/javascript js mjs"
      "application/json json" "application/xml xml" "image/svg+xml svg" "image/png png"
      "image/jpeg jpg jpeg" "image/gif gif" "image/webp webp" "image/avif avif"
      "image/vnd.microsoft.icon ico" "application/wasm wasm" "application/pdf pdf"
      "font/woff woff" "font/woff2 woff2" "application/gzip gz" "application/zip zip"
      "text/markdown md" "text/csv csv" "video/mp4 mp4" "audio/mpeg mp3")
  set(source "a built-in list (no mime.types)")
endif()
foreach(line IN LISTS lines)
  string(REGEX REPLACE "[ \t]+" ";" fields "${line}")
  list(LENGTH fields n)
  if(n LESS 2)
    continue()
  endif()
  list(GET fields 0 type)
  if(NOT type MATCHES "^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$")
    continue()
  endif()
  list(REMOVE_AT fields 0)
  foreach(ext IN LISTS fields)
    string(TOLOWER "${ext}" ext)
    if(NOT ext MATCHES "^[a-z0-9._+-]+$" OR DEFINED "seen_${ext}")
      continue()
    endif()
    set("seen_${ext}" 1)
    # "!" sorts before every extension character, so "ab" comes before "abc"
    list(APPEND pairs "${ext}!${type}")
  endforeach()
endforeach()
list(SORT pairs)
set(out "/* generated from ${source}: do not edit */\n#define MIME_TABLE(MIME) \\\n")
foreach(p IN LISTS pairs)
  string(FIND "${p}" "!" bang)
  string(SUBSTRING "${p}" 0 ${bang} ext)
  math(EXPR t0 "${bang} + 1")
  string(SUBSTRING "${p}" ${t0} -1 type)
  string(APPEND out "    MIME(\"${ext}\", \"${type}\") \\\n")
endforeach()
string(APPEND out "\n")
file(WRITE "${OUT}" "${out}")
