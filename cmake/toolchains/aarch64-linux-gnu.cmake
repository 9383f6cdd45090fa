# aarch64-linux-gnu.cmake: cross-compile a consumer project for Jetson-class aarch64 Linux on an
# x86_64 host with Debian's cross compiler (apt-get install g++-aarch64-linux-gnu).
#
#   cmake -S <project> -B build/aarch64 \
#         -DCMAKE_TOOLCHAIN_FILE=<kiln>/cmake/toolchains/aarch64-linux-gnu.cmake -DKiln_DIR=<kiln>/cmake
#
# kiln artifacts need no CUDA library to link (the runtime dlopens libcuda.so.1 on the target),
# so nothing here points at a CUDA toolkit. With a Jetson sysroot (JetPack's rootfs), set
# KILN_AARCH64_SYSROOT (environment or -D) and libraries and headers are searched there only.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KILN_CROSS_TRIPLE aarch64-linux-gnu CACHE STRING "GNU triple of the cross compiler")
set(CMAKE_C_COMPILER ${KILN_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KILN_CROSS_TRIPLE}-g++)

if(NOT DEFINED KILN_AARCH64_SYSROOT AND DEFINED ENV{KILN_AARCH64_SYSROOT})
  set(KILN_AARCH64_SYSROOT "$ENV{KILN_AARCH64_SYSROOT}")
endif()
if(KILN_AARCH64_SYSROOT)
  set(CMAKE_SYSROOT "${KILN_AARCH64_SYSROOT}")
endif()
# try_compile projects inherit the sysroot choice.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KILN_AARCH64_SYSROOT KILN_CROSS_TRIPLE)

# Programs (code generators, tools) run on the build host; libraries, headers and packages must be
# the target's: never pick an x86_64 library from /usr/lib/x86_64-linux-gnu by accident. Debian's
# cross toolchain keeps the target's own files under /usr/aarch64-linux-gnu.
list(APPEND CMAKE_FIND_ROOT_PATH /usr/${KILN_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
