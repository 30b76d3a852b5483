# Every code from 100 to 599: those in status.txt with their reason phrase,
# the others with an empty one (RFC 9112 §4 allows it), so any code a
# handler or a config gives goes out as itself.
file(STRINGS ${IN} lines)
set(out "/* generated from src/lib/http/status.txt: do not edit */\n#define STATUS_TABLE(STATUS) \\\n")
foreach(line ${lines})
  if(line MATCHES "^([1-5][0-9][0-9]) (.+)$")
    set(reason_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()
foreach(code RANGE 100 599)
  if(DEFINED reason_${code})
    string(APPEND out "    STATUS(${code}, \"${reason_${code}}\") \\\n")
  else()
    string(APPEND out "    STATUS(${code}, \"\") \\\n")
  endif()
endforeach()
string(APPEND out "\n")
file(WRITE ${OUT} "${out}")
