# KilnConfig.cmake: find_package(Kiln) entry point, used straight from a kiln checkout
# (Kiln_DIR=<kiln>/cmake). It only brings in kiln_import_artifacts(); the artifact itself is
# picked, verified and linked when the consumer calls it (see docs/cmake.md).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/Kiln.cmake")
# kiln_groups(): the groups of a kiln checkout, for the projects that build per group.
include("${CMAKE_CURRENT_LIST_DIR}/KilnGroups.cmake")
set(Kiln_FOUND TRUE)
