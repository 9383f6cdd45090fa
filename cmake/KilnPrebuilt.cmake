# KilnPrebuilt.cmake: the prebuilt-tarball half of kiln_import_artifacts() (issue 3, part 5).
#
# Finds dist/kiln_<arch>_<tag>_cuda<major>.tar.gz, checks it before anything is written (sha256
# against its sidecar, then every entry's path and type), extracts it through a hidden sibling
# staging directory that is renamed into place only after its metadata and library check out, and
# compares an already expanded directory with its tarball so that neither silently wins. The
# rules are those of docs/packaging.md (the C++ `kiln verify`), re-stated here because a consumer
# configures with CMake alone, without a kiln binary. Included by Kiln.cmake; every function here
# is internal to it and uses its helpers (_kiln_fatal, _kiln_read_metadata, ...).
include_guard(GLOBAL)

# Artifact files are named by kiln (variant names, metadata.json, libkiln.a): nothing outside
# this set is legitimate, and refusing the rest keeps CMake's list handling (';', '[') safe.
set(_KILN_ENTRY_CHARS "A-Za-z0-9._+/-")

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

# The tarball's sha256 must equal the one in its sidecar `<tarball>.sha256` (sha256sum format,
# naming this file); a tarball without one is never trusted.
function(_kiln_check_sidecar tarball)
  set(sidecar "${tarball}.sha256")
  get_filename_component(name "${tarball}" NAME)
  if(NOT EXISTS "${sidecar}")
    _kiln_fatal("kiln: ${tarball} has no checksum file ${sidecar}; an unchecked tarball is "
                "never extracted. Copy the .sha256 published with it (or re-run kiln package). "
                "Nothing was extracted.")
  endif()
  file(READ "${sidecar}" line LIMIT 4096)
  if(NOT line MATCHES "^([0-9a-f]+) [ *]([^\n]+)\n?$")
    _kiln_fatal("kiln: ${sidecar} is not in sha256sum format (expected one line "
                "'<64 hex digits>  ${name}'). Nothing was extracted.")
  endif()
  set(expected "${CMAKE_MATCH_1}")
  set(named "${CMAKE_MATCH_2}")
  string(LENGTH "${expected}" digits)
  if(NOT digits EQUAL 64 OR NOT named STREQUAL name)
    _kiln_fatal("kiln: ${sidecar} is not in sha256sum format for ${name} (expected one line "
                "'<64 hex digits>  ${name}', found '${expected}  ${named}'). Nothing was "
                "extracted.")
  endif()
  file(SHA256 "${tarball}" actual)
  if(NOT actual STREQUAL expected)
    _kiln_fatal("kiln: ${tarball}: sha256 ${actual} does not match ${sidecar} (expected "
                "${expected}); the tarball is damaged or was modified. Nothing was extracted; "
                "download or package it again.")
  endif()
endfunction()

# Every entry of the tarball, read from its listing before anything is extracted: a regular file
# or directory (no link, device or fifo), under `<tag>/`, relative, with no '.', '..' or empty
# component, named with kiln's characters, and not listed twice.
function(_kiln_check_entries tarball tag)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar tf "${tarball}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE paths ERROR_VARIABLE err)
  if(rc EQUAL 0)
    # The long listing, only for each entry's type: the first character of its line.
    execute_process(COMMAND "${CMAKE_COMMAND}" -E tar tvf "${tarball}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE long ERROR_VARIABLE err)
  endif()
  if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
    _kiln_fatal("kiln: ${tarball} cannot be read as a tar.gz (${rc}: ${err}). Nothing was "
                "extracted.")
  endif()
  set(bad_char "[^\n${_KILN_ENTRY_CHARS}]")
  if(paths MATCHES "${bad_char}")
    string(REGEX MATCH "[^\n]*${bad_char}[^\n]*" entry "${paths}")
    _kiln_fatal("kiln: ${tarball}: entry '${entry}' has a character outside "
                "[${_KILN_ENTRY_CHARS}], which kiln never writes. Nothing was extracted.")
  endif()
  string(REGEX MATCHALL "[^\n]+" entries "${paths}")
  # "\n." rather than "(^|\n).": MATCHALL would re-anchor ^ at every match.
  string(REGEX MATCHALL "\n." types "\n${long}")
  list(LENGTH entries n)
  list(LENGTH types ntypes)
  if(n EQUAL 0 OR NOT n EQUAL ntypes)
    _kiln_fatal("kiln: ${tarball}: the listing has ${n} names but ${ntypes} entries; refusing "
                "a tarball whose names cannot be read one per line. Nothing was extracted.")
  endif()
  set(seen "")
  set(i 0)
  foreach(entry IN LISTS entries)
    list(GET types ${i} type)
    math(EXPR i "${i} + 1")
    string(STRIP "${type}" type)
    set(why "")
    if(entry MATCHES "^/")
      set(why "is an absolute path")
    elseif(entry MATCHES "(^|/)\\.\\.(/|$)")
      set(why "has a '..' component")
    elseif(entry MATCHES "(^|/)\\.(/|$)" OR entry MATCHES "//")
      set(why "has a '.' or empty component")
    elseif(NOT entry MATCHES "^${tag}/")
      set(why "is not under ${tag}/ (every entry must be)")
    elseif(type STREQUAL "l")
      set(why "is a symbolic link (only regular files and directories are allowed)")
    elseif(type STREQUAL "h")
      set(why "is a hard link (only regular files and directories are allowed)")
    elseif(NOT type MATCHES "^[-d]$")
      set(why "is a special file, type '${type}' (only regular files and directories are allowed)")
    elseif(entry IN_LIST seen)
      set(why "appears twice")
    endif()
    if(NOT why STREQUAL "")
      _kiln_fatal("kiln: ${tarball}: entry '${entry}' ${why}. Nothing was extracted.")
    endif()
    list(APPEND seen "${entry}")
  endforeach()
endfunction()

# After extraction, before the rename: only `<tag>` at the top of `staging`, and no links under
# it (the listing was checked; this is the belt to its braces).
function(_kiln_check_extracted staging tag tarball)
  file(GLOB top LIST_DIRECTORIES true RELATIVE "${staging}" "${staging}/*" "${staging}/.*")
  list(REMOVE_ITEM top "." "..")
  if(NOT top STREQUAL tag)
    _kiln_fatal("kiln: ${tarball} extracted to '${top}', expected only '${tag}'")
  endif()
  file(GLOB_RECURSE all LIST_DIRECTORIES true "${staging}/${tag}/*")
  foreach(path IN LISTS all)
    if(IS_SYMLINK "${path}")
      _kiln_fatal("kiln: ${tarball} extracted a symbolic link ${path}; refused")
    endif()
  endforeach()
endfunction()

# Extracts a checked tarball to <dest_root>/<tag>: into a hidden sibling staging directory, whose
# metadata and library are verified, then renamed into place. Any refusal removes the staging
# directory (through _kiln_fatal), so the artifact directory either appears whole or not at all.
function(_kiln_extract_tarball tarball dest_root tag arch)
  _kiln_check_sidecar("${tarball}")
  _kiln_check_entries("${tarball}" "${tag}")
  string(RANDOM LENGTH 8 suffix)
  set(staging "${dest_root}/.${tag}.extract-cmake-${suffix}")
  set(_KILN_CLEANUP_DIR "${staging}")
  set(_KILN_FATAL_CONTEXT "while checking the contents of ${tarball}; nothing was extracted")
  file(MAKE_DIRECTORY "${staging}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xf "${tarball}"
                  WORKING_DIRECTORY "${staging}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    _kiln_fatal("kiln: extracting ${tarball} failed (${rc}: ${err})")
  endif()
  _kiln_check_extracted("${staging}" "${tag}" "${tarball}")
  _kiln_read_metadata(json "${staging}/${tag}" "${arch}" "${tag}")
  _kiln_check_library(lib "${json}" "${staging}/${tag}")

  file(RENAME "${staging}/${tag}" "${dest_root}/${tag}" RESULT renamed)
  file(REMOVE_RECURSE "${staging}")
  if(NOT renamed STREQUAL "0" AND NOT IS_DIRECTORY "${dest_root}/${tag}")
    _kiln_fatal("kiln: cannot move the extracted ${tag} into ${dest_root} (${renamed})")
  endif()
  # A concurrent configure that won the rename left its own copy; the caller checks it the same.
  message(STATUS "kiln: extracted ${tarball} -> ${dest_root}/${tag} (sha256 and entries checked)")
endfunction()

# The metadata.json of a checked tarball, read from a temporary directory (only that entry).
function(_kiln_tarball_metadata out tarball tag)
  _kiln_check_sidecar("${tarball}")
  _kiln_check_entries("${tarball}" "${tag}")
  string(RANDOM LENGTH 8 suffix)
  set(tmp "${CMAKE_BINARY_DIR}/CMakeFiles/kiln-tarball-metadata-${suffix}")
  set(_KILN_CLEANUP_DIR "${tmp}")
  file(MAKE_DIRECTORY "${tmp}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xf "${tarball}" "${tag}/metadata.json"
                  WORKING_DIRECTORY "${tmp}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  set(file "${tmp}/${tag}/metadata.json")
  if(NOT rc EQUAL 0 OR NOT EXISTS "${file}" OR IS_SYMLINK "${file}")
    _kiln_fatal("kiln: ${tarball} has no readable ${tag}/metadata.json (${rc}: ${err})")
  endif()
  file(READ "${file}" json)
  file(REMOVE_RECURSE "${tmp}")
  set(${out} "${json}" PARENT_SCOPE)
endfunction()

# An expanded directory next to its own tarball (the one named by the directory's arch, tag and
# CUDA major) must be that tarball's artifact: equal fingerprints. Otherwise neither is taken.
function(_kiln_check_against_tarball json dir dist arch tag rebuild)
  set(file "${dir}/metadata.json")
  _kiln_json(cuda_version "${json}" "${file}" cuda_version)
  string(REGEX MATCH "^[0-9]+" major "${cuda_version}")
  set(tarball "${dist}/kiln_${arch}_${tag}_cuda${major}.tar.gz")
  if(NOT EXISTS "${tarball}")
    return()
  endif()
  _kiln_tarball_metadata(packed "${tarball}" "${tag}")
  _kiln_json(dir_fp "${json}" "${file}" fingerprint)
  _kiln_json(tar_fp "${packed}" "${tarball}:${tag}/metadata.json" fingerprint)
  if(dir_fp STREQUAL tar_fp)
    message(STATUS "kiln: ${dir} is the artifact of ${tarball} (fingerprint ${dir_fp})")
    return()
  endif()
  string(JSON dir_date ERROR_VARIABLE ignored GET "${json}" build_date)
  string(JSON tar_date ERROR_VARIABLE ignored GET "${packed}" build_date)
  _kiln_fatal("kiln: expanded artifact ${dir} disagrees with its tarball ${tarball}:\n"
              "  directory metadata.json fingerprint ${dir_fp} (built ${dir_date})\n"
              "  tarball   metadata.json fingerprint ${tar_fp} (built ${tar_date})\n"
              "An expanded directory never silently wins over its tarball. Either\n"
              "  use the tarball: delete ${dir} (the next configure re-extracts it), or\n"
              "  keep the directory: re-package it (kiln package ${dir} --dist ${dist}) or "
              "remove the tarball, or\n"
              "  rebuild from the sources: ${rebuild}")
endfunction()
