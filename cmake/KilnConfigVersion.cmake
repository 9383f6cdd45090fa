# KilnConfigVersion.cmake: the package version is the one in kiln's top-level CMakeLists.txt
# (project(kiln VERSION x.y.z)), read here so it is written down once. Compatible when the
# major version matches and the request is not newer; in 0.x the minor version must match too,
# since 0.x minors may change the artifact contract.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../CMakeLists.txt" _kiln_project
     REGEX "^project\\(kiln VERSION [0-9]+\\.[0-9]+\\.[0-9]+")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" PACKAGE_VERSION "${_kiln_project}")
unset(_kiln_project)

set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_VERSION STREQUAL "")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
elseif(NOT PACKAGE_FIND_VERSION OR PACKAGE_FIND_VERSION STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  string(REGEX MATCHALL "[0-9]+" _kiln_have "${PACKAGE_VERSION}")
  list(GET _kiln_have 0 _kiln_major)
  list(GET _kiln_have 1 _kiln_minor)
  if(PACKAGE_FIND_VERSION VERSION_LESS_EQUAL PACKAGE_VERSION
     AND PACKAGE_FIND_VERSION_MAJOR EQUAL _kiln_major
     AND (NOT _kiln_major EQUAL 0 OR PACKAGE_FIND_VERSION_MINOR EQUAL _kiln_minor))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
  unset(_kiln_have)
  unset(_kiln_major)
  unset(_kiln_minor)
endif()
