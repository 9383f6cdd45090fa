# End-to-end tests of kiln_import_artifacts(), run as `cmake -DCASE=<case> ... -P` by ctest.
#
# Each case configures a consumer project in its own WORK_DIR and checks the outcome and the
# exact lines the module printed: the real example against an artifact built by the real kiln
# (cases example, missing_group), and the small probe project against hand-made fixture artifacts
# whose metadata.json this script writes (every other case).
#
# Inputs: CASE, REPO_DIR (the kiln checkout), WORK_DIR (scratch, wiped), GENERATOR, CXX,
# and for the real cases ARTIFACTS_DIR (where the shared fixture test built the artifact).
cmake_minimum_required(VERSION 3.25)
foreach(var CASE REPO_DIR WORK_DIR GENERATOR CXX)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()
set(PROBE_DIR "${CMAKE_CURRENT_LIST_DIR}/probe")
set(EXAMPLE_DIR "${REPO_DIR}/examples/consumer")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# ---------------------------------------------------------------------------------------------
# Running and checking.

# Configures `source` into a fresh WORK_DIR/build with Kiln_DIR set (no cache carried over from
# the previous configure); OUTPUT and RESULT in the caller.
function(configure source)
  file(REMOVE_RECURSE "${WORK_DIR}/build")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${source}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
            "-DCMAKE_CXX_COMPILER=${CXX}" "-DKiln_DIR=${REPO_DIR}/cmake" ${ARGN}
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}" PARENT_SCOPE)
  set(RESULT "${result}" PARENT_SCOPE)
endfunction()

function(fail why)
  message(FATAL_ERROR "FAIL (${CASE}): ${why}\n--- output ---\n${OUTPUT}")
endfunction()

function(expect_success)
  if(NOT RESULT EQUAL 0)
    fail("expected the configure to succeed; it exited ${RESULT}")
  endif()
endfunction()

# The configure failed, and its output has every one of the given strings (literally).
function(expect_failure)
  if(RESULT EQUAL 0)
    fail("expected the configure to fail; it succeeded")
  endif()
  expect_output(${ARGN})
  string(REGEX MATCH "CMake Error[^\n]*\n(  [^\n]*\n|\n)*" refusal "${OUTPUT}")
  message(STATUS "refused as expected:\n${refusal}")
endfunction()

# CMake wraps long FATAL_ERROR text; compare with runs of whitespace collapsed to one space.
function(expect_output)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUTPUT}")
  foreach(needle IN LISTS ARGN)
    string(REGEX REPLACE "[ \t\r\n]+" " " needle "${needle}")
    string(FIND "${flat}" "${needle}" at)
    if(at EQUAL -1)
      fail("the output lacks: ${needle}")
    endif()
  endforeach()
endfunction()

function(expect_no_output)
  foreach(needle IN LISTS ARGN)
    string(FIND "${OUTPUT}" "${needle}" at)
    if(NOT at EQUAL -1)
      fail("the output should not have: ${needle}")
    endif()
  endforeach()
endfunction()

# ---------------------------------------------------------------------------------------------
# Fixture artifacts: a metadata.json written here, a library of a few bytes. Two groups, so that
# GROUPS gating shows: rmsnorm (whose inputs are the checkout's kernels/rmsnorm/ and
# kernels/common/ files, as kiln records them) and softmax (absent from the checkout). Each of
# FX_SCHEMA, FX_LIB_SHA, FX_META_TAG overrides one field; FX_INPUT_SHA the recorded sha256 of
# kernels/rmsnorm/kiln.toml; FX_DROP_INPUT leaves one path out of the inputs.

# `"path": "sha256"` entries for every file under the given kernels/ subdirectories.
function(fixture_inputs out)
  set(entries "")
  foreach(sub IN LISTS ARGN)
    file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${REPO_DIR}"
         "${REPO_DIR}/kernels/${sub}/*")
    foreach(path IN LISTS files)
      if(path STREQUAL "${FX_DROP_INPUT}")
        continue()
      endif()
      file(SHA256 "${REPO_DIR}/${path}" sha)
      if(path STREQUAL "kernels/rmsnorm/kiln.toml" AND DEFINED FX_INPUT_SHA)
        set(sha "${FX_INPUT_SHA}")
      endif()
      list(APPEND entries "\"${path}\": \"${sha}\"")
    endforeach()
  endforeach()
  list(JOIN entries ", " entries)
  set(${out} "{${entries}}" PARENT_SCOPE)
endfunction()

function(write_fixture root arch tag)
  set(dir "${root}/${arch}/${tag}")
  file(MAKE_DIRECTORY "${dir}/include/kiln" "${dir}/cubins")
  file(WRITE "${dir}/lib/libkiln.a" "!<arch>\nfixture ${arch} ${tag}\n")
  file(SHA256 "${dir}/lib/libkiln.a" lib_sha)
  set(schema 1)
  set(meta_tag "${tag}")
  foreach(field SCHEMA LIB_SHA META_TAG)
    string(TOLOWER "${field}" lower)
    if(DEFINED FX_${field})
      set(${lower} "${FX_${field}}")
    endif()
  endforeach()
  fixture_inputs(rmsnorm_inputs rmsnorm common)
  fixture_inputs(softmax_inputs common)

  string(REPLACE "sm_" "" sms "${tag}")
  string(REPLACE "_" ";" sms "${sms}")
  set(gpu_archs "")
  set(per_sm "")
  foreach(sm IN LISTS sms)
    list(APPEND gpu_archs "\"sm_${sm}\"")
    list(APPEND per_sm "\"${sm}\": {\"target\": \"sm_${sm}\", \"symbol\": \"x\"}")
  endforeach()
  list(JOIN gpu_archs ", " gpu_archs)
  list(JOIN per_sm ", " per_sm)

  set(variants "")
  foreach(entry rmsnorm:rmsnorm_h1024_bf16 rmsnorm:rmsnorm_h4096_bf16 softmax:softmax_d128_fp16)
    string(REPLACE ":" ";" entry "${entry}")
    list(GET entry 0 group)
    list(GET entry 1 name)
    list(APPEND variants "\"${name}\": {\"group\": \"${group}\", \"kind\": \"cuda\", \
\"object\": \"${name}\", \"inputs\": ${${group}_inputs}, \
\"fingerprint\": \"f-${name}\", \"sms\": {${per_sm}}}")
  endforeach()
  list(JOIN variants ",\n    " variants)

  file(WRITE "${dir}/metadata.json" "{
  \"schema_version\": ${schema},
  \"kiln_version\": \"0.1.0\",
  \"arch\": \"${arch}\",
  \"host_target\": \"${arch}-linux-gnu\",
  \"tag\": \"${meta_tag}\",
  \"gpu_archs\": [${gpu_archs}],
  \"library\": {\"path\": \"lib/libkiln.a\", \"sha256\": \"${lib_sha}\", \"size\": 1},
  \"fingerprint\": \"fixture-${arch}-${tag}\",
  \"groups\": {
    \"rmsnorm\": {\"kind\": \"cuda\",
                 \"variants\": [\"rmsnorm_h1024_bf16\", \"rmsnorm_h4096_bf16\"]},
    \"softmax\": {\"kind\": \"cuda\", \"variants\": [\"softmax_d128_fp16\"]}
  },
  \"variants\": {
    ${variants}
  }
}
")
endfunction()

set(FIXTURES "${WORK_DIR}/artifacts")
set(PROBE_ARGS "-DKILN_ARTIFACTS_DIR=${FIXTURES}")

# ---------------------------------------------------------------------------------------------
# The cases.

# The example consumer against the real artifact: every define the metadata implies is printed,
# the project builds and links, and the binary exits 0 (a GPU run that matched, or the expected
# "no driver/device" error).
function(case_example)
  file(GLOB metadata "${ARTIFACTS_DIR}/*/*/metadata.json")
  list(LENGTH metadata n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "FAIL (${CASE}): expected one artifact under ${ARTIFACTS_DIR}, found ${n}")
  endif()
  file(READ "${metadata}" json)
  configure("${EXAMPLE_DIR}" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}")
  expect_success()

  set(expected "kiln: KILN_RMSNORM_ENABLED set")
  string(JSON members GET "${json}" groups rmsnorm variants)
  string(JSON count LENGTH "${members}")
  if(count EQUAL 0)
    fail("the artifact's rmsnorm group lists no variants")
  endif()
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON variant GET "${members}" ${i})
    string(TOUPPER "${variant}" upper)
    list(APPEND expected "kiln: KILN_${upper}_ENABLED set")
  endforeach()
  string(JSON tag GET "${json}" tag)
  string(JSON arch GET "${json}" arch)
  list(APPEND expected "kiln: KILN_ARTIFACT_SM_90 set"
       "kiln: imported ${arch}/${tag}: 1 groups, ${count} variants, SMs 90")
  expect_output(${expected})
  message(STATUS "configure printed all ${count} variant defines, the group define and the summary")

  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  if(NOT result EQUAL 0)
    fail("the example does not build")
  endif()
  execute_process(COMMAND "${WORK_DIR}/build/kiln_consumer"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  message(STATUS "kiln_consumer:\n${OUTPUT}")
  if(NOT result EQUAL 0)
    fail("kiln_consumer exited ${result}")
  endif()
  expect_output("canImplement(" ": ok")
endfunction()

# GROUPS names a group the artifact lacks: refused at configure, with the command that builds it.
function(case_missing_group)
  file(GLOB metadata "${ARTIFACTS_DIR}/*/*/metadata.json")
  get_filename_component(dir "${metadata}" DIRECTORY)
  get_filename_component(tag "${dir}" NAME)
  get_filename_component(arch_dir "${dir}" DIRECTORY)
  get_filename_component(arch "${arch_dir}" NAME)
  # A list through an initial-cache file: a ';' on the command line would split the argument.
  file(WRITE "${WORK_DIR}/groups.cmake"
       [=[set(KILN_CONSUMER_GROUPS "rmsnorm;nosuchgroup" CACHE STRING "")]=])
  configure("${EXAMPLE_DIR}" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}" -C "${WORK_DIR}/groups.cmake")
  expect_failure("GROUPS asks for nosuchgroup" "(kernels/nosuchgroup/kiln.toml does not exist"
                 "kiln build --gpu-arch ${tag} --arch ${arch} --kernels nosuchgroup --output-dir")
endfunction()

# A good fixture, GROUPS selecting one of its two groups: exactly that group's defines.
function(case_fixture_ok)
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64" "-DPROBE_GROUPS=rmsnorm")
  expect_success()
  expect_output("kiln: KILN_RMSNORM_ENABLED set" "kiln: KILN_RMSNORM_H1024_BF16_ENABLED set"
                "kiln: KILN_RMSNORM_H4096_BF16_ENABLED set" "kiln: KILN_ARTIFACT_SM_90 set"
                "kiln: imported x86_64/sm_90: 1 groups, 2 variants, SMs 90"
                "probe: tag=sm_90 fingerprint=fixture-x86_64-sm_90"
                "probe: links=kiln::artifact")
  expect_no_output("KILN_SOFTMAX")
  # No GROUPS: every group.
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=AMD64")
  expect_success()
  expect_output("kiln: KILN_SOFTMAX_ENABLED set" "kiln: KILN_SOFTMAX_D128_FP16_ENABLED set"
                "kiln: imported x86_64/sm_90: 2 groups, 3 variants, SMs 90")
endfunction()

function(case_fixture_bad_sha)
  set(FX_LIB_SHA "0000000000000000000000000000000000000000000000000000000000000000")
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("libkiln.a: sha256" "does not match metadata.json library.sha256 ${FX_LIB_SHA}")
endfunction()

function(case_fixture_schema)
  set(FX_SCHEMA 2)
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("schema_version 2 is not supported; this kiln reads schema_version 1")
endfunction()

function(case_fixture_stale)
  set(FX_INPUT_SHA "1111111111111111111111111111111111111111111111111111111111111111")
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("is stale: input kernels/rmsnorm/kiln.toml of variant"
                 "kiln build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm,softmax --clean")
endfunction()

# A file added to the group since the build (here: one the fixture did not record).
function(case_fixture_new_input)
  set(FX_DROP_INPUT "kernels/rmsnorm/kiln.toml")
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("is stale: kernels/rmsnorm/kiln.toml is new since the build"
                 "kiln build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm,softmax --clean")
endfunction()

# metadata.json whose tag disagrees with its directory (a renamed directory).
function(case_fixture_tag_mismatch)
  set(FX_META_TAG sm_80)
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("tag is 'sm_80' but the directory is 'sm_90'")
endfunction()

# Two artifacts and no TAG: both listed. A platform name resolves by the table; one below
# kiln's range is refused; no artifact at all names the command that makes one.
function(case_fixture_tags)
  write_fixture("${FIXTURES}" aarch64 sm_87)
  write_fixture("${FIXTURES}" aarch64 sm_110)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64")
  expect_failure("2 artifacts under ${FIXTURES}/aarch64/ (sm_110, sm_87); pass TAG")

  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DPROBE_TAG=jetson-orin")
  expect_success()
  expect_output("kiln: platform jetson-orin -> sm_87" "probe: tag=sm_87"
                "probe: dir=${FIXTURES}/aarch64/sm_87" "kiln: KILN_ARTIFACT_SM_87 set")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DPROBE_TAG=jetson-thor")
  expect_success()
  expect_output("probe: tag=sm_110" "kiln: KILN_ARTIFACT_SM_110 set")

  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DPROBE_TAG=jetson-xavier")
  expect_failure("TAG 'jetson-xavier' is sm_72, below kiln's range (sm_80 and newer)")

  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DPROBE_TAG=sm_90")
  expect_failure(
    "no artifact ${FIXTURES}/aarch64/sm_90 (present for aarch64: sm_110, sm_87)"
    "kiln build --gpu-arch sm_90 --arch aarch64 --kernels ALL --output-dir ${FIXTURES}")

  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("no artifact under ${FIXTURES}/x86_64/"
                 "kiln build --gpu-arch sm_90 --arch x86_64 --kernels ALL --output-dir ${FIXTURES}")
endfunction()

# A two-SM artifact: both SM defines, and a missing group needs a --clean rebuild of all groups.
function(case_fixture_multi_sm)
  write_fixture("${FIXTURES}" x86_64 sm_87_sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_success()
  expect_output("kiln: KILN_ARTIFACT_SM_87 set" "kiln: KILN_ARTIFACT_SM_90 set"
                "kiln: imported x86_64/sm_87_sm_90: 2 groups, 3 variants, SMs 87 90")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64" "-DPROBE_GROUPS=fmha")
  expect_failure(
    "kiln build --gpu-arch sm_87,sm_90 --arch x86_64 --kernels rmsnorm,softmax,fmha --clean")
endfunction()

if(NOT COMMAND case_${CASE})
  message(FATAL_ERROR "consumer_test.cmake: unknown CASE '${CASE}'")
endif()
cmake_language(CALL case_${CASE})
message(STATUS "PASS (${CASE})")
