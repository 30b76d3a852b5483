# commit.cmake - writes OUT = "#define COLIBRI_COMMIT ..." with the commit
# SRC is checked out at (git describe: a tag or a hash, "-dirty" for local
# changes), or "unknown" outside git. Run at every build (the colibri_commit
# target); OUT is rewritten only when it changes, so nothing rebuilds else.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE r)
if(NOT r EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define COLIBRI_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
