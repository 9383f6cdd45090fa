# KilnVerify.cmake: the verifier kiln_import_artifacts() runs on every tarball before extracting
# it and on every artifact directory before using it (docs/cmake.md, "The verifier").
#
# The rules are not restated here: kiln-verify (tools/kiln-verify) is built from the same library
# code as `kiln verify` and `kiln extract` (kiln_verify), so the import refuses exactly what the
# CLI refuses (docs/packaging.md, "What verify checks"). It is KILN_VERIFY_EXECUTABLE when set,
# else built from this checkout's sources into the consumer's build tree at configure time, with
# the host's compiler (it runs where CMake runs, also when the project cross-compiles). Included by
# Kiln.cmake; uses its _kiln_fatal.
include_guard(GLOBAL)

set(KILN_VERIFY_EXECUTABLE "" CACHE FILEPATH
    "kiln-verify of this checkout, run on artifacts and tarballs; empty: built at configure time")

# kiln's version, from the one place it is written (KilnConfigVersion.cmake reads it).
function(_kiln_version out)
  include("${_KILN_MODULE_DIR}/KilnConfigVersion.cmake")
  set(${out} "${PACKAGE_VERSION}" PARENT_SCOPE)
endfunction()

# The last `lines` lines of `text`, for an error that quotes a tool's output.
function(_kiln_tail out text lines)
  string(REGEX MATCHALL "[^\n]+" all "${text}")
  list(LENGTH all n)
  if(n GREATER lines)
    math(EXPR first "${n} - ${lines}")
    list(SUBLIST all ${first} ${lines} all)
  endif()
  list(JOIN all "\n    " joined)
  set(${out} "    ${joined}" PARENT_SCOPE)
endfunction()

# Configures and builds tools/kiln-verify into <build>/CMakeFiles/kiln-verify once per build tree
# (later configures rebuild only what changed in its sources), with the consumer's compiler unless
# the project cross-compiles (then the host's default: the verifier must run here).
function(_kiln_build_verifier out version)
  set(src "${_KILN_REPO_DIR}/tools/kiln-verify")
  set(bin "${CMAKE_BINARY_DIR}/CMakeFiles/kiln-verify")
  set(args "-DCMAKE_BUILD_TYPE=Release" "-DKILN_VERIFY_VERSION=${version}")
  if(NOT CMAKE_CROSSCOMPILING)
    list(APPEND args "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}")
    if(CMAKE_CXX_COMPILER_LAUNCHER)
      list(APPEND args "-DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}")
    endif()
  endif()
  string(CONCAT how
         "the dependencies of tools/kiln-verify are fmt, nlohmann_json, OpenSSL (libcrypto) and "
         "libarchive (Debian/Ubuntu, also JetPack: apt-get install libfmt-dev "
         "nlohmann-json3-dev libssl-dev libarchive-dev); or point -DKILN_VERIFY_EXECUTABLE= at a "
         "kiln-verify built from this checkout (kiln's own build has one: "
         "build/release/tools/kiln-verify/kiln-verify)")
  if(NOT EXISTS "${bin}/CMakeCache.txt")
    message(STATUS "kiln: building kiln-verify from ${src}")
    execute_process(COMMAND "${CMAKE_COMMAND}" -S "${src}" -B "${bin}" ${args}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
    if(NOT rc EQUAL 0)
      file(REMOVE_RECURSE "${bin}")
      _kiln_tail(tail "${log}" 12)
      _kiln_fatal("kiln: cannot configure kiln-verify (${src}), which checks every artifact "
                  "before it is used:\n${tail}\n${how}")
    endif()
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${bin}" --target kiln-verify
                  RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(NOT rc EQUAL 0)
    _kiln_tail(tail "${log}" 12)
    _kiln_fatal("kiln: cannot build kiln-verify (${src}):\n${tail}\n${how}")
  endif()
  set(${out} "${bin}/kiln-verify" PARENT_SCOPE)
endfunction()

# The verifier to run: KILN_VERIFY_EXECUTABLE, or the one built from this checkout. Either must
# answer `--version` with this kiln's version, so a verifier of another kiln is not taken.
function(_kiln_verifier out)
  get_property(done GLOBAL PROPERTY _KILN_VERIFIER)
  if(done)
    set(${out} "${done}" PARENT_SCOPE)
    return()
  endif()
  _kiln_version(version)
  if(KILN_VERIFY_EXECUTABLE)
    set(verifier "${KILN_VERIFY_EXECUTABLE}")
  else()
    _kiln_build_verifier(verifier "${version}")
  endif()
  execute_process(COMMAND "${verifier}" --version RESULT_VARIABLE rc OUTPUT_VARIABLE said
                  ERROR_VARIABLE said OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR NOT said STREQUAL "kiln-verify ${version}")
    _kiln_fatal("kiln: ${verifier} --version said '${said}' (exit ${rc}); expected "
                "'kiln-verify ${version}', the verifier of this kiln checkout "
                "(${_KILN_REPO_DIR}). Unset KILN_VERIFY_EXECUTABLE to build it here.")
  endif()
  set_property(GLOBAL PROPERTY _KILN_VERIFIER "${verifier}")
  set(${out} "${verifier}" PARENT_SCOPE)
endfunction()

# Runs the verifier with ARGN; its line on success in `out`. A refusal stops the configure with
# the verifier's own message (every problem, each naming the file and what was expected), then
# `advice`.
function(_kiln_verify out advice)
  _kiln_verifier(verifier)
  execute_process(COMMAND "${verifier}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE line
                  ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    _kiln_fatal("${err}\n${advice}")
  endif()
  set(${out} "${line}" PARENT_SCOPE)
endfunction()
