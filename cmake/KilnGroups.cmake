# KilnGroups.cmake: kernel groups found, never listed. A group is a folder kernels/<group>/ with a
# kiln.toml; what else it holds is found by one naming convention (docs/adding-a-kernel.md):
#   runner/selector.cpp, runner/runner.cpp, runner/include/   the runner
#   tests/*_test.cpp                                           CPU tests (kiln's own build, ctest)
#   tests/<group>_runner_test.cpp                              ... one also compiled with runner.cpp
#   tests/gpu/<group>_numerics_test.cpp                        GPU numerics (tests/gpu project)
#   tests/gpu/cases.h                                          the cases GPU test and bench share
#   bench/<group>_bridge.cpp, bench/<group>_vs_torch.py        benchmark (bench project)
# Used by kiln's own build, the GPU test project and the bench project, so that a new group is one
# new folder.
include_guard(GLOBAL)

# The groups under `kernels_dir` (folders with a kiln.toml), sorted, in <out>.
function(kiln_groups out kernels_dir)
  file(GLOB tomls CONFIGURE_DEPENDS RELATIVE "${kernels_dir}" "${kernels_dir}/*/kiln.toml")
  set(groups "")
  foreach(toml IN LISTS tomls)
    get_filename_component(group "${toml}" DIRECTORY)
    list(APPEND groups "${group}")
  endforeach()
  list(SORT groups)
  set(${out} "${groups}" PARENT_SCOPE)
endfunction()

# The groups of the artifact kiln_import_artifacts() would pick for ARCH/TAG under
# `artifacts_dir` that also have `file` (relative to their folder) in `kernels_dir`, in <out>:
# the groups a GPU test or bench project can build for that artifact. A group of the checkout
# that the artifact lacks is announced and left out.
function(kiln_groups_with out kernels_dir file artifact_groups)
  kiln_groups(all "${kernels_dir}")
  set(found "")
  foreach(group IN LISTS all)
    string(REPLACE "<group>" "${group}" path "${file}")
    if(NOT EXISTS "${kernels_dir}/${group}/${path}")
      continue()
    endif()
    if(NOT group IN_LIST artifact_groups)
      message(STATUS "kiln: group ${group} is not in the artifact; its ${path} is not built")
      continue()
    endif()
    list(APPEND found "${group}")
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()
