# Generates gen/builtins.h: every BUILTIN_MODULE(id) and BUILTIN_HANDLER(id)
# found in the library's sources, as X-macro lists (see src/lib/server/builtin.h).
set(BUILTINS_OUT ${GEN_DIR}/builtins.h)
add_custom_command(
  OUTPUT ${BUILTINS_OUT}
  COMMAND ${CMAKE_COMMAND} -DOUT=${BUILTINS_OUT} -DSRC=${CMAKE_SOURCE_DIR}/src/lib
          -P ${CMAKE_SOURCE_DIR}/cmake/scripts/builtins.cmake
  DEPENDS ${LIB_SOURCES} ${CMAKE_SOURCE_DIR}/cmake/scripts/builtins.cmake
  COMMENT "Generating builtins.h")
list(APPEND GEN_SOURCES ${BUILTINS_OUT})
