# kiln_settings: the INTERFACE target that carries warnings and sanitizers for kiln's own code.
# Every kiln target links it; third-party headers come in as SYSTEM and stay out of -Werror.
add_library(kiln_settings INTERFACE)
target_compile_options(kiln_settings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wshadow -Wconversion -Wno-sign-conversion>)
# GCC 12 reports -Wrestrict inside std::string's own code at -O3 (GCC bug 105329, a false
# positive fixed in GCC 13); it is not about our code, so it stays a warning there.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(kiln_settings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=restrict>)
endif()
if(KILN_SANITIZE)
  target_compile_options(kiln_settings INTERFACE -fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer
                                                 -fno-sanitize-recover=all)
  target_link_options(kiln_settings INTERFACE -fsanitize=${KILN_SANITIZE})
endif()
