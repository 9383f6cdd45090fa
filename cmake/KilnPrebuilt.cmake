# KilnPrebuilt.cmake: the prebuilt-tarball half of kiln_import_artifacts() (issue 3, part 5).
#
# Finds dist/kiln_<arch>_<tag>_cuda<major>.tar.gz, has kiln-verify (KilnVerify.cmake) verify and
# extract it into the artifacts tree, and compares an already expanded directory with its tarball
# so that neither silently wins. No rule of docs/packaging.md is restated here: checksum, entries,
# bounds, contents and the staged extraction are kiln-verify's, the code of `kiln extract`.
# Included by Kiln.cmake; every function here is internal to it and uses its helpers.
include_guard(GLOBAL)

# The tarball file names for `arch` in `dist` (sorted); with a non-empty `tag`, that tag's only.
function(_kiln_list_tarballs out dist arch tag)
  set(names "")
  set(tag_re "${_KILN_TAG_RE}")
  if(NOT tag STREQUAL "")
    set(tag_re "${tag}")
  endif()
  if(IS_DIRECTORY "${dist}")
    file(GLOB candidates LIST_DIRECTORIES false RELATIVE "${dist}" "${dist}/kiln_${arch}_*.tar.gz")
    foreach(name IN LISTS candidates)
      if(name MATCHES "^kiln_${arch}_${tag_re}_cuda[0-9]+\\.tar\\.gz$")
        list(APPEND names "${name}")
      endif()
    endforeach()
    list(SORT names)
  endif()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

# kiln_<arch>_<tag>_cuda<major>.tar.gz -> <tag>.
function(_kiln_tarball_tag out name arch)
  string(REGEX MATCH "^kiln_${arch}_(${_KILN_TAG_RE})_cuda[0-9]+\\.tar\\.gz$" m "${name}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# The tarball of `tag` to extract, or "" when there is none. Several CUDA majors of one tag are
# told apart by KILN_CUDA_MAJOR, else by the toolkit the consumer found (find_package(CUDAToolkit)
# before kiln_import_artifacts); with neither, only a single one is taken.
function(_kiln_pick_tarball out dist arch tag)
  _kiln_list_tarballs(names "${dist}" "${arch}" "${tag}")
  set(${out} "" PARENT_SCOPE)
  if(names STREQUAL "")
    return()
  endif()
  list(JOIN names ", " listed)
  set(major "${KILN_CUDA_MAJOR}")
  set(source "KILN_CUDA_MAJOR")
  if(major STREQUAL "" AND DEFINED CUDAToolkit_VERSION_MAJOR)
    set(major "${CUDAToolkit_VERSION_MAJOR}")
    set(source "the CUDA toolkit found (${CUDAToolkit_VERSION})")
  endif()
  if(NOT major STREQUAL "")
    set(name "kiln_${arch}_${tag}_cuda${major}.tar.gz")
    if(NOT name IN_LIST names)
      _kiln_fatal("kiln: no ${dist}/${name} (CUDA ${major}, from ${source}); ${dist} has "
                  "${listed}. Set -DKILN_CUDA_MAJOR=<major> to take another, or package the "
                  "artifact for CUDA ${major}.")
    endif()
  else()
    list(LENGTH names n)
    if(n GREATER 1)
      _kiln_fatal("kiln: ${n} tarballs of ${arch}/${tag} in ${dist} (${listed}) and no CUDA "
                  "major to choose by; set -DKILN_CUDA_MAJOR=<major> or call "
                  "find_package(CUDAToolkit) before kiln_import_artifacts()")
    endif()
    set(name "${names}")
  endif()
  set(${out} "${dist}/${name}" PARENT_SCOPE)
endfunction()

# Verifies `tarball` and extracts it into <artifacts_dir>/<arch>/<tag> (kiln-verify --extract:
# everything checked in memory first, then written into a hidden sibling staging directory that
# is renamed into place, so the directory appears whole or not at all).
function(_kiln_extract_tarball tarball artifacts_dir)
  _kiln_verify(said "(kiln-verify refused ${tarball}; nothing was extracted)"
               --extract "${tarball}" --into "${artifacts_dir}")
  string(REGEX REPLACE "^artifact: " "" dir "${said}")
  message(STATUS "kiln: extracted ${tarball} -> ${dir} (verified by kiln-verify)")
endfunction()

# "fingerprint <fp>, built <date>" of a verifier's ok line, in <out>_FINGERPRINT / <out>_DATE.
function(_kiln_verified_fields out line)
  string(REGEX MATCH ", fingerprint ([0-9a-f]+), built ([^,]*)" m "${line}")
  set(${out}_FINGERPRINT "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${out}_DATE "${CMAKE_MATCH_2}" PARENT_SCOPE)
endfunction()

# An expanded directory next to its own tarball (the one named by the directory's arch, tag and
# CUDA major) must be that tarball's artifact: the tarball verifies and the fingerprints are
# equal. Otherwise neither is taken. `verified` is the directory's verifier line.
function(_kiln_check_against_tarball json verified dir dist arch tag rebuild)
  string(JSON cuda_version GET "${json}" cuda_version)
  string(REGEX MATCH "^[0-9]+" major "${cuda_version}")
  set(tarball "${dist}/kiln_${arch}_${tag}_cuda${major}.tar.gz")
  if(NOT EXISTS "${tarball}")
    return()
  endif()
  set(advice "(kiln-verify refused ${tarball}, the tarball of ${dir}; replace or remove it)")
  _kiln_verify(packed "${advice}" "${tarball}")
  _kiln_verified_fields(dir "${verified}")
  _kiln_verified_fields(tar "${packed}")
  if(dir_FINGERPRINT STREQUAL tar_FINGERPRINT)
    message(STATUS "kiln: ${dir} is the artifact of ${tarball} (fingerprint ${dir_FINGERPRINT})")
    return()
  endif()
  _kiln_fatal("kiln: expanded artifact ${dir} disagrees with its tarball ${tarball}:\n"
              "  directory metadata.json fingerprint ${dir_FINGERPRINT} (built ${dir_DATE})\n"
              "  tarball   metadata.json fingerprint ${tar_FINGERPRINT} (built ${tar_DATE})\n"
              "An expanded directory never silently wins over its tarball. Either\n"
              "  use the tarball: delete ${dir} (the next configure re-extracts it), or\n"
              "  keep the directory: re-package it (kiln package ${dir} --dist ${dist}) or "
              "remove the tarball, or\n"
              "  rebuild from the sources: ${rebuild}")
endfunction()
