# Embeds a file's bytes into a C++ header, at build time (tools/kiln/CMakeLists.txt runs it as a
# custom command that depends on the file, so an edit of the file regenerates the header):
#
#   cmake -DINPUT=<file> -DOUTPUT=<header> -DNAME=<symbol> [-DLABEL=<name in the comment>]
#         -P embed_file.cmake
#
# The header defines, in namespace kiln::embedded, `unsigned char <NAME>[]` (the bytes, then one
# NUL that is not counted, so an empty file is still a valid array) and `std::size_t <NAME>Size`.
# The bytes are exactly the file's: read as hex, never as text, so no encoding or line ending is
# touched. The header is rewritten only when its text changes, so nothing recompiles needlessly.
cmake_minimum_required(VERSION 3.25)
foreach(var INPUT OUTPUT NAME)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()
if("${LABEL}" STREQUAL "")
  set(LABEL "${INPUT}")
endif()
file(SIZE "${INPUT}" size)
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)  # CMake's regex has no {16}
string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "\
// Generated at build time by tools/kiln/embed_file.cmake from ${LABEL}; do not edit.
#pragma once

#include <cstddef>

namespace kiln::embedded {

inline constexpr unsigned char ${NAME}[] = {
    ${bytes}0x00};
inline constexpr std::size_t ${NAME}Size = ${size};

}  // namespace kiln::embedded
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
