# kiln_core does not depend on the kiln runtime (tools/kiln/CMakeLists.txt): run by ctest as
#   cmake -DCOMPILE_COMMANDS=<build>/compile_commands.json -DLINKS=<kiln_core_links.txt>
#         -DSOURCE_DIR=<kiln checkout> -P core_dependencies_test.cmake
# Every compile command of a kiln_core source (tools/kiln/core/, tools/kiln/io/) must be free of
# the runtime's include directories (runtime/include, runtime/testing/include, runtime/src), and
# kiln_core's link libraries (its own and its interface's, as CMake generated them) must not
# name a runtime target. The compile commands show the include path with every transitive usage
# requirement applied, so a runtime dependency reached through another target fails too.
cmake_minimum_required(VERSION 3.25)
file(READ "${COMPILE_COMMANDS}" json)
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
set(core_sources 0)
foreach(i RANGE ${last})
  string(JSON file GET "${json}" ${i} file)
  if(NOT file MATCHES "^${SOURCE_DIR}/tools/kiln/(core|io)/")
    continue()
  endif()
  math(EXPR core_sources "${core_sources} + 1")
  string(JSON command GET "${json}" ${i} command)
  foreach(dir runtime/include runtime/testing/include runtime/src)
    string(FIND "${command}" "${SOURCE_DIR}/${dir}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "FAIL: ${file} (kiln_core) is compiled with -I ${SOURCE_DIR}/${dir}: "
                          "kiln_core must not depend on the runtime\n${command}")
    endif()
  endforeach()
endforeach()
if(core_sources EQUAL 0)
  message(FATAL_ERROR "FAIL: no compile command of a kiln_core source in ${COMPILE_COMMANDS}")
endif()
file(READ "${LINKS}" links)
if(links MATCHES "kiln_runtime")
  message(FATAL_ERROR "FAIL: kiln_core links the runtime: ${links}")
endif()
message(STATUS "PASS: ${core_sources} kiln_core sources compiled without the runtime's headers; "
               "kiln_core links: ${links}")
