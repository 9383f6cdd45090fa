# Kiln.cmake: kiln_import_artifacts(), the consumer side of a kiln artifact (docs/cmake.md).
#
#   kiln_import_artifacts(TARGETS t1 [t2...]
#                         [ARCH x86_64|aarch64]          default: CMAKE_SYSTEM_PROCESSOR, normalised
#                         [TAG sm_90|sm_87_sm_90|jetson-orin|...]  default: ${KILN_TAG}, else
#                                                        the only artifact
#                         [GROUPS g1 g2...]              default: every group in the artifact
#                         [ARTIFACTS_DIR dir]            default: ${KILN_ARTIFACTS_DIR}
#                         [DIST_DIR dir])                default: ${KILN_DIST_DIR}
#
# Resolves <ARTIFACTS_DIR>/<arch>/<tag>/, extracting it from the prebuilt tarball
# <DIST_DIR>/kiln_<arch>_<tag>_cuda<major>.tar.gz when the directory is missing
# (KilnPrebuilt.cmake), refuses it unless kiln-verify (KilnVerify.cmake: the rules of
# `kiln verify`, from the same code) accepts it and its tarball's fingerprint and the recorded
# input fingerprints agree, creates the imported
# target kiln::artifact, links it to every TARGET and emits the KILN_*_ENABLED defines by one
# gating rule. Every refusal is a FATAL_ERROR at configure time that names the offending value
# and, where one exists, the `kiln build` command that fixes it. docs/cmake.md is the user's
# guide; docs/artifact-format.md is the metadata schema read here.
include_guard(GLOBAL)

set(_KILN_MODULE_DIR "${CMAKE_CURRENT_LIST_DIR}")
get_filename_component(_KILN_REPO_DIR "${_KILN_MODULE_DIR}/.." ABSOLUTE)
# kiln's SM range starts at Ampere: the runtime and kernels assume sm_80 features.
set(_KILN_MIN_SM 80)
# An artifact tag: its gpu_archs joined by '_', each sm_NN (a cubin) or compute_NN (PTX that the
# driver JIT-compiles at load): sm_90, sm_87_sm_90, compute_80, sm_80_compute_90.
set(_KILN_TAG_RE "(sm|compute)_[0-9]+(_(sm|compute)_[0-9]+)*")

set(KILN_ARTIFACTS_DIR "${_KILN_REPO_DIR}/artifacts" CACHE PATH
    "Where kiln_import_artifacts() looks for <arch>/<tag>/ artifact directories")
set(KILN_DIST_DIR "${_KILN_REPO_DIR}/dist" CACHE PATH
    "Where kiln_import_artifacts() looks for prebuilt kiln_<arch>_<tag>_cuda<major>.tar.gz")
set(KILN_CUDA_MAJOR "" CACHE STRING
    "CUDA major of the prebuilt tarball to take; empty: the CUDA toolkit's if found, else the only one")
set(KILN_SOURCE_ROOT "${_KILN_REPO_DIR}" CACHE PATH
    "The kiln checkout whose kernels/ the staleness check compares against; empty disables it")

# Embedded platforms by name -> SM. Names whose SM is below kiln's range are listed so that the
# refusal says why instead of "unknown platform".
include("${_KILN_MODULE_DIR}/KilnVerify.cmake")
include("${_KILN_MODULE_DIR}/KilnPrebuilt.cmake")

set(_KILN_PLATFORMS
    jetson-orin=87 igx-orin=87 drive-orin=87
    jetson-thor=110 drive-thor=110
    jetson-xavier=72 drive-xavier=72 jetson-tx2=62 jetson-nano=53)

# ---------------------------------------------------------------------------------------------
# Small helpers. Each sets its result in the caller's scope through `out`.

# message(FATAL_ERROR) with the arguments concatenated.
function(_kiln_fatal)
  set(text "")
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE ${last})
    string(APPEND text "${ARGV${i}}")
  endforeach()
  message(FATAL_ERROR "${text}")
endfunction()

# x86_64 / AMD64 / amd64 -> x86_64; aarch64 / arm64 / ARM64 -> aarch64; anything else is fatal.
function(_kiln_normalize_arch out processor)
  string(TOLOWER "${processor}" p)
  if(p MATCHES "^(x86_64|amd64|x64)$")
    set(${out} x86_64 PARENT_SCOPE)
  elseif(p MATCHES "^(aarch64|arm64)$")
    set(${out} aarch64 PARENT_SCOPE)
  else()
    _kiln_fatal("kiln: host arch '${processor}' is not one kiln builds for "
                "(x86_64, aarch64); pass ARCH explicitly")
  endif()
endfunction()

# "sm_87_compute_90" -> "sm_87;compute_90": the tag's gpu_archs entries.
function(_kiln_tag_entries out tag)
  string(REGEX REPLACE "_(sm|compute)_" ";\\1_" entries "${tag}")
  set(${out} "${entries}" PARENT_SCOPE)
endfunction()

# "sm_87_compute_90" -> "87;90": the SM of each entry.
function(_kiln_tag_sms out tag)
  _kiln_tag_entries(entries "${tag}")
  list(TRANSFORM entries REPLACE "^(sm|compute)_" "")
  set(${out} "${entries}" PARENT_SCOPE)
endfunction()

# The command that builds `groups` (a list) for `tag` and `arch` into `artifacts_dir`.
function(_kiln_build_command out tag arch groups artifacts_dir clean)
  _kiln_tag_entries(entries "${tag}")
  list(JOIN entries "," gpu_arch)
  list(JOIN groups "," kernels)
  if(kernels STREQUAL "")
    set(kernels ALL)
  endif()
  set(cmd "kiln build --gpu-arch ${gpu_arch} --arch ${arch} --kernels ${kernels}")
  if(clean)
    string(APPEND cmd " --clean")
  endif()
  get_filename_component(default_dir "${_KILN_REPO_DIR}/artifacts" ABSOLUTE)
  get_filename_component(dir "${artifacts_dir}" ABSOLUTE)
  if(NOT dir STREQUAL default_dir)
    string(APPEND cmd " --output-dir ${dir}")
  endif()
  set(${out} "${cmd}" PARENT_SCOPE)
endfunction()

# The artifact tags present under <artifacts_dir>/<arch>/ (staging directories excluded).
function(_kiln_list_artifacts out arch_dir)
  set(tags "")
  if(IS_DIRECTORY "${arch_dir}")
    file(GLOB entries LIST_DIRECTORIES true RELATIVE "${arch_dir}" "${arch_dir}/sm_*"
         "${arch_dir}/compute_*")
    foreach(entry IN LISTS entries)
      if(IS_DIRECTORY "${arch_dir}/${entry}" AND entry MATCHES "^${_KILN_TAG_RE}$")
        list(APPEND tags "${entry}")
      endif()
    endforeach()
    list(SORT tags)
  endif()
  set(${out} "${tags}" PARENT_SCOPE)
endfunction()

# TAG as given (sm_NN..., or a platform name) -> the directory tag; no TAG -> the single artifact,
# counting expanded directories and prebuilt tarballs in `dist` alike (a tag is one artifact
# whether it is a directory, a tarball or both).
function(_kiln_resolve_tag out requested artifacts_dir dist arch)
  set(hint "(kiln is built at <kiln>/build/release/tools/kiln/kiln by scripts/build.sh)")
  if(requested STREQUAL "")
    _kiln_list_artifacts(tags "${artifacts_dir}/${arch}")
    set(listed "${tags}")
    _kiln_list_tarballs(tarballs "${dist}" "${arch}" "")
    foreach(name IN LISTS tarballs)
      _kiln_tarball_tag(tarball_tag "${name}" "${arch}")
      if(NOT tarball_tag IN_LIST tags)
        list(APPEND tags "${tarball_tag}")
        list(APPEND listed "${tarball_tag} (${name})")
      endif()
    endforeach()
    list(SORT tags)
    list(SORT listed)
    list(LENGTH tags n)
    if(n EQUAL 0)
      _kiln_build_command(cmd sm_90 "${arch}" "" "${artifacts_dir}" OFF)
      _kiln_fatal("kiln: no artifact under ${artifacts_dir}/${arch}/ and no "
                  "kiln_${arch}_<tag>_cuda<major>.tar.gz in ${dist}/. Build one, e.g.\n"
                  "  ${cmd}\n${hint}")
    elseif(n GREATER 1)
      list(JOIN listed ", " listed)
      list(GET tags 0 first)
      set(where "")
      if(NOT tarballs STREQUAL "")
        set(where " or in ${dist}/")
      endif()
      _kiln_fatal("kiln: ${n} artifacts under ${artifacts_dir}/${arch}/${where} (${listed}); "
                  "pass TAG to pick one, e.g. kiln_import_artifacts(... TAG ${first})")
    endif()
    set(${out} "${tags}" PARENT_SCOPE)
    return()
  endif()

  string(TOLOWER "${requested}" name)
  set(tag "${requested}")
  foreach(entry IN LISTS _KILN_PLATFORMS)
    if(entry MATCHES "^${name}=([0-9]+)$")
      set(tag "sm_${CMAKE_MATCH_1}")
      message(STATUS "kiln: platform ${requested} -> ${tag}")
    endif()
  endforeach()
  if(NOT tag MATCHES "^${_KILN_TAG_RE}$")
    string(REGEX REPLACE "=[0-9]+" "" platforms "${_KILN_PLATFORMS}")
    list(JOIN platforms ", " platforms)
    _kiln_fatal("kiln: TAG '${requested}' is neither an artifact tag (sm_90, sm_87_sm_90, "
                "compute_80) nor a known platform (${platforms})")
  endif()
  _kiln_tag_sms(sms "${tag}")
  foreach(sm IN LISTS sms)
    if(sm LESS _KILN_MIN_SM)
      _kiln_fatal("kiln: TAG '${requested}' is sm_${sm}, below kiln's range "
                  "(sm_${_KILN_MIN_SM} and newer); no kiln artifact can target it")
    endif()
  endforeach()
  set(${out} "${tag}" PARENT_SCOPE)
endfunction()

# string(JSON GET) that names the file and the field when the field is missing.
function(_kiln_json out json file)
  string(JSON value ERROR_VARIABLE err GET "${json}" ${ARGN})
  if(err)
    list(JOIN ARGN "." field)
    _kiln_fatal("kiln: ${file}: field '${field}' is missing or malformed (${err})")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# The member names of a JSON object (mode MEMBER) or the elements of a JSON array of strings
# (mode GET) at the path ARGN of `json`, as a list.
function(_kiln_json_list out mode json file)
  string(JSON n ERROR_VARIABLE err LENGTH "${json}" ${ARGN})
  if(err)
    list(JOIN ARGN "." field)
    _kiln_fatal("kiln: ${file}: field '${field}' is missing or malformed (${err})")
  endif()
  set(items "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON item ${mode} "${json}" ${ARGN} ${i})
      list(APPEND items "${item}")
    endforeach()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# <dir>/metadata.json, which kiln-verify accepted, for an artifact requested for `arch` (the one
# import rule that is not the artifact's own: which arch the project asked for).
function(_kiln_read_metadata out dir arch)
  set(file "${dir}/metadata.json")
  file(READ "${file}" json)
  _kiln_json(meta_arch "${json}" "${file}" arch)
  if(NOT meta_arch STREQUAL arch)
    _kiln_fatal("kiln: ${file}: arch is '${meta_arch}' but the artifact was requested "
                "for '${arch}' (directory ${dir})")
  endif()
  set(${out} "${json}" PARENT_SCOPE)
endfunction()

# One recorded input: `path` (relative to the checkout `root`) must still hash to `expected`.
# A macro, so that a path shared by several variants is hashed once (hashed and sha_<path> live
# in _kiln_check_inputs' scope); `owner` names whose input it is in the error.
macro(_kiln_check_recorded path expected owner)
  if(NOT "${path}" IN_LIST hashed)
    set(actual "")
    if(EXISTS "${root}/${path}" AND NOT IS_DIRECTORY "${root}/${path}")
      file(SHA256 "${root}/${path}" actual)
    endif()
    set("sha_${path}" "${actual}")
    list(APPEND hashed "${path}")
  endif()
  string(TOLOWER "${expected}" recorded_sha)
  if("${sha_${path}}" STREQUAL "")
    set(why "is gone from ${root}")
  elseif(NOT "${sha_${path}}" STREQUAL recorded_sha)
    set(why "changed since the build (sha256 ${sha_${path}}, recorded ${recorded_sha})")
  else()
    set(why "")
  endif()
  if(NOT why STREQUAL "")
    _kiln_fatal("kiln: artifact ${dir} is stale: input ${path} of ${owner} ${why}. "
                "Rebuild it:\n  ${rebuild}")
  endif()
endmacro()

# Every input file now under the checkout directories ARGN (relative to `root`) must be among
# the paths listed in the variable named `recorded_var`: a file added since the build is an
# error that says, in `unrecorded`, who did not record it.
function(_kiln_check_unrecorded root dir rebuild recorded_var unrecorded not_inputs)
  set(globs "")
  foreach(sub IN LISTS ARGN)
    list(APPEND globs "${root}/${sub}/*")
  endforeach()
  file(GLOB_RECURSE present LIST_DIRECTORIES false RELATIVE "${root}" ${globs})
  # Documentation (*.md) and hidden files are not inputs (the builder's rule, core/inputs.h), nor
  # what matches `not_inputs`.
  list(FILTER present EXCLUDE REGEX "(\\.md$|(^|/)\\.[^/]*$)")
  if(NOT not_inputs STREQUAL "")
    list(FILTER present EXCLUDE REGEX "${not_inputs}")
  endif()
  foreach(path IN LISTS present)
    if(NOT path IN_LIST ${recorded_var})
      _kiln_fatal("kiln: artifact ${dir} is stale: ${path} is new since the build "
                  "(${unrecorded}). Rebuild it:\n  ${rebuild}")
    endif()
  endforeach()
endfunction()

# Staleness by content, against the kiln checkout. A variant records every file of its group
# directory and of kernels/common/ with its sha256 (docs/artifact-format.md, `inputs`), and the
# artifact every file of runtime/include/, runtime/src/, runtime/doctor/ and
# kernels/<group>/runner/ of its groups (`runtime_inputs`, absent from metadata written before it
# existed): each recorded file must still hash the same (each path is hashed once), and no file
# may have been added to those directories since. The kernels are skipped when the checkout has no kernels/, the runtime when
# it has no runtime/.
function(_kiln_check_inputs json dir arch tag groups artifacts_dir)
  set(root "${KILN_SOURCE_ROOT}")
  if(root STREQUAL "" OR NOT IS_DIRECTORY "${root}/kernels")
    message(STATUS "kiln: no kernels/ under '${root}'; staleness check skipped")
    return()
  endif()
  set(file "${dir}/metadata.json")
  _kiln_build_command(rebuild "${tag}" "${arch}" "${groups}" "${artifacts_dir}" ON)
  _kiln_json(variants "${json}" "${file}" variants)
  _kiln_json_list(names MEMBER "${variants}" "${file}")
  set(hashed "")
  foreach(variant IN LISTS names)
    _kiln_json(group "${variants}" "${file}" "${variant}" group)
    _kiln_json(inputs "${variants}" "${file}" "${variant}" inputs)
    _kiln_json_list(paths MEMBER "${inputs}" "${file}")
    list(APPEND recorded_${group} ${paths})
    foreach(path IN LISTS paths)
      string(JSON expected GET "${inputs}" "${path}")
      _kiln_check_recorded("${path}" "${expected}" "variant ${variant}")
    endforeach()
  endforeach()

  foreach(group IN LISTS groups)
    if(NOT IS_DIRECTORY "${root}/kernels/${group}")
      continue()  # a group gone from the checkout was caught above (its inputs are gone)
    endif()
    # A group's runner/ is an input of the runtime, its tests/ and bench/ of nothing.
    _kiln_check_unrecorded("${root}" "${dir}" "${rebuild}" recorded_${group}
                           "no variant of group ${group} recorded it"
                           "^kernels/${group}/(runner|tests|bench)/" kernels/${group} kernels/common)
  endforeach()

  string(JSON runtime_inputs ERROR_VARIABLE absent GET "${json}" runtime_inputs)
  if(absent)
    message(STATUS "kiln: ${file} records no runtime_inputs (an older kiln wrote it); the "
                   "runtime's staleness is not checked")
    return()
  endif()
  if(NOT IS_DIRECTORY "${root}/runtime")
    message(STATUS "kiln: no runtime/ under '${root}'; the runtime's staleness check skipped")
    return()
  endif()
  _kiln_json_list(runtime_paths MEMBER "${runtime_inputs}" "${file}")
  foreach(path IN LISTS runtime_paths)
    string(JSON expected GET "${runtime_inputs}" "${path}")
    _kiln_check_recorded("${path}" "${expected}" "the runtime")
  endforeach()
  set(runtime_dirs runtime/include runtime/src runtime/doctor)
  foreach(group IN LISTS groups)
    if(IS_DIRECTORY "${root}/kernels/${group}/runner")
      list(APPEND runtime_dirs kernels/${group}/runner)
    endif()
  endforeach()
  _kiln_check_unrecorded("${root}" "${dir}" "${rebuild}" runtime_paths
                         "the artifact's runtime_inputs do not list it" "" ${runtime_dirs})
endfunction()

# The gating rule, in one place. A group is enabled when the artifact has it and GROUPS (if
# given) asks for it; a variant is enabled when its group is; every SM of the artifact is
# announced. A requested group that the artifact lacks is fatal, with the command that builds it.
function(_kiln_gate out_defines out_groups out_variants json dir arch tag requested artifacts_dir)
  set(file "${dir}/metadata.json")
  _kiln_json(groups_json "${json}" "${file}" groups)
  _kiln_json_list(groups MEMBER "${groups_json}" "${file}")

  set(missing "")
  foreach(group IN LISTS requested)
    if(NOT group IN_LIST groups)
      list(APPEND missing "${group}")
    endif()
  endforeach()
  if(NOT missing STREQUAL "")
    list(JOIN missing ", " missing_listed)
    list(JOIN groups ", " have)
    _kiln_tag_sms(sms "${tag}")
    list(LENGTH sms nsms)
    if(nsms EQUAL 1)  # a single-SM build merges new groups into the existing artifact
      _kiln_build_command(cmd "${tag}" "${arch}" "${missing}" "${artifacts_dir}" OFF)
    else()            # a multi-SM build is rebuilt whole
      set(all ${groups} ${missing})
      _kiln_build_command(cmd "${tag}" "${arch}" "${all}" "${artifacts_dir}" ON)
    endif()
    set(unknown "")
    foreach(group IN LISTS missing)
      if(IS_DIRECTORY "${KILN_SOURCE_ROOT}/kernels" AND
         NOT EXISTS "${KILN_SOURCE_ROOT}/kernels/${group}/kiln.toml")
        string(APPEND unknown " (kernels/${group}/kiln.toml does not exist in ${KILN_SOURCE_ROOT}:"
                      " check the name; `kiln list` shows the groups)")
      endif()
    endforeach()
    _kiln_fatal("kiln: GROUPS asks for ${missing_listed}, which artifact ${dir} does not "
                "have (it has: ${have})${unknown}. Build it with:\n  ${cmd}")
  endif()

  set(defines "")
  set(enabled_groups "")
  set(enabled_variants "")
  foreach(group IN LISTS groups)
    if(NOT requested STREQUAL "" AND NOT group IN_LIST requested)
      continue()
    endif()
    string(TOUPPER "${group}" upper)
    list(APPEND defines "KILN_${upper}_ENABLED=1")
    list(APPEND enabled_groups "${group}")
    _kiln_json_list(members GET "${groups_json}" "${file}" "${group}" variants)
    foreach(variant IN LISTS members)
      string(TOUPPER "${variant}" upper)
      list(APPEND defines "KILN_${upper}_ENABLED=1")
      list(APPEND enabled_variants "${variant}")
    endforeach()
  endforeach()
  # One define per SM, cubin or PTX alike (the artifact serves that SM), and for a PTX entry
  # also KILN_ARTIFACT_PTX_<NN> (its code is JIT-compiled by the driver at the first load).
  _kiln_tag_entries(entries "${tag}")
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "^(sm|compute)_" "" sm "${entry}")
    list(APPEND defines "KILN_ARTIFACT_SM_${sm}=1")
    if(entry MATCHES "^compute_")
      list(APPEND defines "KILN_ARTIFACT_PTX_${sm}=1")
    endif()
  endforeach()

  set(${out_defines} "${defines}" PARENT_SCOPE)
  set(${out_groups} "${enabled_groups}" PARENT_SCOPE)
  set(${out_variants} "${enabled_variants}" PARENT_SCOPE)
endfunction()

# kiln::artifact, one per project (two libkiln.a in one link would define every runtime symbol
# twice). GLOBAL, so that a static library importing it in one directory can be linked by an
# executable in another: the library's link interface names kiln::artifact, which must resolve
# wherever the final link happens, or libkiln.a, -ldl and Threads would be lost on the way.
function(_kiln_make_target lib dir fingerprint)
  if(TARGET kiln::artifact)
    get_target_property(previous kiln::artifact IMPORTED_LOCATION)
    if(NOT previous STREQUAL lib)
      _kiln_fatal("kiln: kiln::artifact already imports ${previous}; one artifact per "
                  "project (asked for ${lib})")
    endif()
    return()
  endif()
  if(NOT TARGET Threads::Threads)
    find_package(Threads REQUIRED)
  endif()
  add_library(kiln::artifact STATIC IMPORTED GLOBAL)
  set_target_properties(kiln::artifact PROPERTIES
    IMPORTED_LOCATION "${lib}"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "${dir}/include"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS};Threads::Threads"
    KILN_ARTIFACT_FINGERPRINT "${fingerprint}")
endfunction()

# No directory and no tarball for the resolved tag: what is present, and the command that builds it.
function(_kiln_missing_artifact dir dist arch tag groups artifacts_dir)
  _kiln_list_artifacts(present "${artifacts_dir}/${arch}")
  _kiln_list_tarballs(tarballs "${dist}" "${arch}" "")
  list(APPEND present ${tarballs})
  list(JOIN present ", " present)
  if(present STREQUAL "")
    set(present "none")
  endif()
  _kiln_build_command(cmd "${tag}" "${arch}" "${groups}" "${artifacts_dir}" OFF)
  _kiln_fatal("kiln: no artifact ${dir} and no kiln_${arch}_${tag}_cuda<major>.tar.gz in "
              "${dist}/ (present for ${arch}: ${present}). Build it with:\n  ${cmd}")
endfunction()

# ---------------------------------------------------------------------------------------------
function(kiln_import_artifacts)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "ARCH;TAG;ARTIFACTS_DIR;DIST_DIR" "TARGETS;GROUPS")
  if(arg_UNPARSED_ARGUMENTS)
    _kiln_fatal("kiln_import_artifacts: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGETS)
    _kiln_fatal("kiln_import_artifacts: TARGETS is required")
  endif()
  foreach(target IN LISTS arg_TARGETS)
    if(NOT TARGET "${target}")
      _kiln_fatal("kiln_import_artifacts: '${target}' is not a target")
    endif()
  endforeach()
  if(NOT arg_ARTIFACTS_DIR)
    set(arg_ARTIFACTS_DIR "${KILN_ARTIFACTS_DIR}")
  endif()
  get_filename_component(artifacts_dir "${arg_ARTIFACTS_DIR}" ABSOLUTE)
  if(NOT arg_DIST_DIR)
    set(arg_DIST_DIR "${KILN_DIST_DIR}")
  endif()
  # One knob for every consumer project (tests/gpu, bench, examples): -DKILN_TAG=sm_90.
  if(NOT arg_TAG AND DEFINED KILN_TAG)
    set(arg_TAG "${KILN_TAG}")
  endif()
  get_filename_component(dist "${arg_DIST_DIR}" ABSOLUTE)
  if(NOT arg_ARCH)
    set(arg_ARCH "${CMAKE_SYSTEM_PROCESSOR}")
  endif()
  _kiln_normalize_arch(arch "${arg_ARCH}")
  _kiln_normalize_arch(target_arch "${CMAKE_SYSTEM_PROCESSOR}")
  if(NOT arch STREQUAL target_arch)
    message(WARNING "kiln: importing an ${arch} artifact into a build for ${target_arch}; "
            "it will not link")
  endif()
  if(NOT arg_GROUPS STREQUAL "")
    list(REMOVE_DUPLICATES arg_GROUPS)
  endif()

  _kiln_resolve_tag(tag "${arg_TAG}" "${artifacts_dir}" "${dist}" "${arch}")
  set(dir "${artifacts_dir}/${arch}/${tag}")
  set(extracted OFF)
  if(NOT IS_DIRECTORY "${dir}")
    _kiln_pick_tarball(tarball "${dist}" "${arch}" "${tag}")
    if(tarball STREQUAL "")
      _kiln_missing_artifact("${dir}" "${dist}" "${arch}" "${tag}" "${arg_GROUPS}"
                             "${artifacts_dir}")
    endif()
    _kiln_extract_tarball("${tarball}" "${artifacts_dir}")
    set(extracted ON)
  endif()

  # Every configure, before anything of the artifact is read or linked: every rule of
  # `kiln verify` (metadata, tag, cubins, library, doctor, headers, names, recorded inputs).
  set(advice "(kiln-verify refused the artifact ${dir}; rebuild it with --clean, or delete it")
  string(APPEND advice " to re-extract its tarball)")
  _kiln_verify(verified "${advice}" "${dir}")
  message(STATUS "kiln: ${verified}")
  _kiln_read_metadata(json "${dir}" "${arch}")
  _kiln_json(lib_path "${json}" "${dir}/metadata.json" library path)
  set(lib "${dir}/${lib_path}")
  _kiln_json(all_groups_json "${json}" "${dir}/metadata.json" groups)
  _kiln_json_list(all_groups MEMBER "${all_groups_json}" "${dir}/metadata.json")
  _kiln_build_command(rebuild "${tag}" "${arch}" "${all_groups}" "${artifacts_dir}" ON)
  if(NOT extracted)  # just extracted from it: equal by construction
    _kiln_check_against_tarball("${json}" "${verified}" "${dir}" "${dist}" "${arch}" "${tag}"
                                "${rebuild}")
  endif()
  _kiln_check_inputs("${json}" "${dir}" "${arch}" "${tag}" "${all_groups}" "${artifacts_dir}")
  _kiln_gate(defines groups variants "${json}" "${dir}" "${arch}" "${tag}" "${arg_GROUPS}"
     "${artifacts_dir}")
  _kiln_json(fingerprint "${json}" "${dir}/metadata.json" fingerprint)

  _kiln_make_target("${lib}" "${dir}" "${fingerprint}")
  foreach(target IN LISTS arg_TARGETS)
    get_target_property(type "${target}" TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      set(scope INTERFACE)
    else()
      set(scope PUBLIC)
    endif()
    target_link_libraries("${target}" ${scope} kiln::artifact)
    target_compile_definitions("${target}" ${scope} ${defines})
  endforeach()

  foreach(define IN LISTS defines)
    string(REGEX REPLACE "=.*" "" name "${define}")
    message(STATUS "kiln: ${name} set")
  endforeach()
  list(LENGTH groups ngroups)
  list(LENGTH variants nvariants)
  _kiln_tag_sms(sms "${tag}")
  list(JOIN sms " " sms_listed)
  message(STATUS "kiln: imported ${arch}/${tag}: ${ngroups} groups, ${nvariants} variants, "
         "SMs ${sms_listed}")

  set(KILN_ARTIFACT_DIR "${dir}" PARENT_SCOPE)
  set(KILN_ARTIFACT_ARCH "${arch}" PARENT_SCOPE)
  set(KILN_ARTIFACT_TAG "${tag}" PARENT_SCOPE)
  set(KILN_ARTIFACT_FINGERPRINT "${fingerprint}" PARENT_SCOPE)
  set(KILN_ARTIFACT_GROUPS "${groups}" PARENT_SCOPE)
  set(KILN_ARTIFACT_VARIANTS "${variants}" PARENT_SCOPE)
  set(KILN_ARTIFACT_SMS "${sms}" PARENT_SCOPE)
endfunction()
