# Generates gen/status_table.h from src/lib/http/status.txt:
#   STATUS(200, "OK") ...
set(STATUS_SRC ${CMAKE_SOURCE_DIR}/src/lib/http/status.txt)
set(STATUS_OUT ${GEN_DIR}/status_table.h)
add_custom_command(
  OUTPUT ${STATUS_OUT}
  COMMAND ${CMAKE_COMMAND} -DIN=${STATUS_SRC} -DOUT=${STATUS_OUT} -P ${CMAKE_SOURCE_DIR}/cmake/scripts/status.cmake
  DEPENDS ${STATUS_SRC} ${CMAKE_SOURCE_DIR}/cmake/scripts/status.cmake
  COMMENT "Generating status_table.h")
list(APPEND GEN_SOURCES ${STATUS_OUT})
