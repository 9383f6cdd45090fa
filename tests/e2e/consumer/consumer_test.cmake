# End-to-end tests of kiln_import_artifacts(), run as `cmake -DCASE=<case> ... -P` by ctest.
#
# Each case configures a consumer project in its own WORK_DIR and checks the outcome and the
# exact lines the module printed: the real example against an artifact built by the real kiln
# (cases example, missing_group, ...), the small probe project against that artifact copied,
# packaged by `kiln package` or made hostile (tarball_*, hostile: refused by the real
# kiln-verify), and the probe against hand-made fixture artifacts whose metadata.json this script
# writes (fixture_*, tarball_tags), which test locating, gating and staleness with a verifier
# that accepts everything (accept_all_verifier.sh): the real one refuses their fake libraries.
#
# Inputs: CASE, REPO_DIR (the kiln checkout), WORK_DIR (scratch, wiped), GENERATOR, CXX,
# VERIFIER (the KILN_VERIFY_EXECUTABLE every configure gets; empty: the module builds its own),
# and for the real cases ARTIFACTS_DIR (where the shared fixture test built the artifact) and
# KILN (the kiln binary).
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
            "-DCMAKE_CXX_COMPILER=${CXX}" "-DKiln_DIR=${REPO_DIR}/cmake"
            "-DKILN_VERIFY_EXECUTABLE=${VERIFIER}" ${ARGN}
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
# kernels/common/ files, as kiln records them) and softmax (absent from the checkout).
# FX_CUDA_VERSION overrides cuda_version; FX_INPUT_SHA the recorded sha256 of
# kernels/rmsnorm/kiln.toml; FX_DROP_INPUT leaves one path out of the inputs. The runtime_inputs
# are the checkout's runtime/include/, runtime/src/, runtime/doctor/ and kernels/rmsnorm/runner/
# files, as kiln
# records them; FX_RUNTIME_SHA is the recorded sha256 of runtime/src/status.cpp, and
# FX_NO_RUNTIME_INPUTS leaves the field out (metadata of a kiln that predates it).

# `"path": "sha256"` entries for every file under the given subdirectories of the checkout.
function(fixture_inputs out)
  set(entries "")
  foreach(sub IN LISTS ARGN)
    file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${REPO_DIR}"
         "${REPO_DIR}/${sub}/*")
    list(FILTER files EXCLUDE REGEX "(\\.md$|(^|/)\\.[^/]*$)")  # not inputs, as kiln records
    if(NOT sub MATCHES "/runner$")
      # A group's runner/ is the library's input (runtime_inputs), its tests/ and bench/ nobody's:
      # no variant records them (core/inputs.h kNonKernelDirs).
      list(FILTER files EXCLUDE REGEX "^kernels/[^/]+/(runner|tests|bench)/")
    endif()
    foreach(path IN LISTS files)
      if(path STREQUAL "${FX_DROP_INPUT}")
        continue()
      endif()
      file(SHA256 "${REPO_DIR}/${path}" sha)
      if(path STREQUAL "kernels/rmsnorm/kiln.toml" AND DEFINED FX_INPUT_SHA)
        set(sha "${FX_INPUT_SHA}")
      elseif(path STREQUAL "runtime/src/status.cpp" AND DEFINED FX_RUNTIME_SHA)
        set(sha "${FX_RUNTIME_SHA}")
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
  set(cuda_version "13.0.88")
  if(DEFINED FX_CUDA_VERSION)
    set(cuda_version "${FX_CUDA_VERSION}")
  endif()
  fixture_inputs(rmsnorm_inputs kernels/rmsnorm kernels/common)
  fixture_inputs(softmax_inputs kernels/common)
  fixture_inputs(runtime_inputs runtime/include runtime/src runtime/doctor kernels/rmsnorm/runner)
  set(runtime_field "\n  \"runtime_inputs\": ${runtime_inputs},")
  if(FX_NO_RUNTIME_INPUTS)
    set(runtime_field "")
  endif()

  # The tag's entries, sm_NN (a cubin) or compute_NN (PTX): "sm_87_compute_90" -> sm_87;compute_90.
  string(REGEX REPLACE "_(sm|compute)_" ";\\1_" entries "${tag}")
  set(gpu_archs "")
  set(per_sm "")
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "^(sm|compute)_" "" sm "${entry}")
    set(format cubin)
    if(entry MATCHES "^compute_")
      set(format ptx)
    endif()
    list(APPEND gpu_archs "\"${entry}\"")
    list(APPEND per_sm "\"${sm}\": {\"target\": \"${entry}\", \"format\": \"${format}\", \"symbol\": \"x\"}")
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
  \"schema_version\": 1,
  \"kiln_version\": \"0.1.0\",
  \"arch\": \"${arch}\",
  \"host_target\": \"${arch}-linux-gnu\",
  \"cuda_version\": \"${cuda_version}\",
  \"build_date\": \"2025-01-01T00:00:00Z\",
  \"tag\": \"${tag}\",
  \"gpu_archs\": [${gpu_archs}],
  \"library\": {\"path\": \"lib/libkiln.a\", \"sha256\": \"${lib_sha}\", \"size\": 1},
  \"fingerprint\": \"fixture-${arch}-${tag}\",${runtime_field}
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
set(DIST "${WORK_DIR}/dist")
set(PROBE_ARGS "-DKILN_ARTIFACTS_DIR=${FIXTURES}" "-DKILN_DIST_DIR=${DIST}")

# ---------------------------------------------------------------------------------------------
# Fixture tarballs. A fixture artifact (write_fixture, so no `kiln package`, which verifies real
# cubins and ELF objects) is laid out in WORK_DIR/pack and tarred by `cmake -E tar` with kiln's
# layout: every entry under <tag>/. `extra` paths (relative to pack/<arch>) are added as given,
# which is how the hostile `../` entries are made.

function(write_sidecar tarball)
  get_filename_component(name "${tarball}" NAME)
  file(SHA256 "${tarball}" sha)
  file(WRITE "${tarball}.sha256" "${sha}  ${name}\n")
endfunction()

function(pack_fixture arch tag)
  set(pack "${WORK_DIR}/pack")
  file(REMOVE_RECURSE "${pack}/${arch}/${tag}")
  write_fixture("${pack}" "${arch}" "${tag}")
  set(major 13)
  if(DEFINED FX_CUDA_MAJOR)
    set(major "${FX_CUDA_MAJOR}")
  endif()
  set(tarball "${DIST}/kiln_${arch}_${tag}_cuda${major}.tar.gz")
  file(MAKE_DIRECTORY "${DIST}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar czf "${tarball}" "${tag}" ${ARGN}
                  WORKING_DIRECTORY "${pack}/${arch}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FAIL (${CASE}): cmake -E tar could not write ${tarball}")
  endif()
  write_sidecar("${tarball}")
endfunction()

# Neither the artifact directory nor a staging leftover (.<tag>.extract-*) exists.
function(expect_nothing_extracted arch tag)
  if(EXISTS "${FIXTURES}/${arch}/${tag}")
    fail("${FIXTURES}/${arch}/${tag} was created")
  endif()
  file(GLOB leftovers "${FIXTURES}/${arch}/.*" "${FIXTURES}/${arch}/*")
  if(NOT leftovers STREQUAL "")
    fail("left behind: ${leftovers}")
  endif()
endfunction()

# Rewrites one byte of `file` at `offset` to a different value (dd, so the rest is untouched).
function(flip_byte file offset)
  file(READ "${file}" old OFFSET ${offset} LIMIT 1 HEX)
  set(new "\\377")
  if(old STREQUAL "ff")
    set(new "\\000")
  endif()
  execute_process(COMMAND sh -c "printf '${new}' | dd of='${file}' bs=1 seek=${offset} conv=notrunc 2>/dev/null"
                  RESULT_VARIABLE rc)
  file(READ "${file}" now OFFSET ${offset} LIMIT 1 HEX)
  if(NOT rc EQUAL 0 OR now STREQUAL old)
    message(FATAL_ERROR "FAIL (${CASE}): could not flip byte ${offset} of ${file}")
  endif()
endfunction()

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
  configure("${EXAMPLE_DIR}" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}" "-DKILN_DIST_DIR=${DIST}")
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

# Every input of the real artifact's library is checked at configure time, against a copy of the
# checkout (KILN_SOURCE_ROOT): one line appended to a runtime source, or to the group's runner, or
# a file added to the runner, makes the artifact stale, naming that file and the rebuild command;
# editing or adding files in the group's tests/ and bench/ does not (they are no input of the
# artifact).
function(case_library_inputs)
  file(GLOB metadata "${ARTIFACTS_DIR}/*/*/metadata.json")
  list(LENGTH metadata n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "FAIL (${CASE}): expected one artifact under ${ARTIFACTS_DIR}, found ${n}")
  endif()
  file(READ "${metadata}" json)
  string(JSON groups GET "${json}" groups)
  string(JSON group MEMBER "${groups}" 0)  # rmsnorm
  string(JSON arch GET "${json}" arch)
  set(root "${WORK_DIR}/checkout")
  set(pristine "${WORK_DIR}/pristine")
  foreach(dir runtime kernels/common kernels/${group})
    get_filename_component(parent "${dir}" DIRECTORY)
    file(COPY "${REPO_DIR}/${dir}" DESTINATION "${root}/${parent}")
    file(COPY "${REPO_DIR}/${dir}" DESTINATION "${pristine}/${parent}")
  endforeach()
  set(args "${PROBE_DIR}" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}" "-DKILN_DIST_DIR=${DIST}"
           "-DKILN_SOURCE_ROOT=${root}" "-DPROBE_ARCH=${arch}")
  set(rebuild "--kernels ${group} --clean")

  configure(${args})
  expect_success()
  expect_no_output("is stale")
  message(STATUS "the unchanged copy of the checkout: not stale")

  # `path` (relative to the copy) edited: the configure names it; then it is put back.
  function(expect_stale_after_edit_of_input path)
    file(APPEND "${root}/${path}" "// one more line\n")
    configure(${args})
    expect_failure("is stale: input ${path} of the runtime changed since the build" "${rebuild}")
    file(COPY_FILE "${pristine}/${path}" "${root}/${path}")
  endfunction()

  file(GLOB runtime_sources RELATIVE "${root}" "${root}/runtime/src/*.cpp")
  list(GET runtime_sources 0 runtime_source)
  expect_stale_after_edit_of_input("${runtime_source}")
  file(GLOB runtime_headers RELATIVE "${root}" "${root}/runtime/include/kiln/*.h")
  list(GET runtime_headers 0 runtime_header)
  expect_stale_after_edit_of_input("${runtime_header}")
  # bin/kiln-doctor's main is an input of the artifact too.
  expect_stale_after_edit_of_input("runtime/doctor/kiln_doctor.cpp")
  file(GLOB runner_sources RELATIVE "${root}" "${root}/kernels/${group}/runner/*.cpp")
  if(runner_sources STREQUAL "")
    fail("kernels/${group}/runner/ holds no .cpp in ${REPO_DIR}")
  endif()
  foreach(path IN LISTS runner_sources)
    expect_stale_after_edit_of_input("${path}")
  endforeach()
  file(WRITE "${root}/kernels/${group}/runner/extra.cpp" "int extra;\n")
  configure(${args})
  expect_failure("is stale: kernels/${group}/runner/extra.cpp is new since the build (the "
                 "artifact's runtime_inputs do not list it)" "${rebuild}")
  file(REMOVE "${root}/kernels/${group}/runner/extra.cpp")
  configure(${args})
  expect_success()

  # tests/ and bench/: every file edited, and one new file in each.
  file(GLOB_RECURSE test_files RELATIVE "${root}" "${root}/kernels/${group}/tests/*"
                                                 "${root}/kernels/${group}/bench/*")
  if(test_files STREQUAL "")
    fail("kernels/${group} has no tests/ or bench/ files in ${REPO_DIR}")
  endif()
  foreach(path IN LISTS test_files)
    file(APPEND "${root}/${path}" "\n// edited after the build\n")
  endforeach()
  file(WRITE "${root}/kernels/${group}/tests/${group}_added_test.cpp" "// a new test\n")
  file(WRITE "${root}/kernels/${group}/bench/${group}_added.py" "# a new bench script\n")
  configure(${args})
  expect_success()
  expect_no_output("is stale")
  list(LENGTH test_files edited)
  message(STATUS "${edited} files of kernels/${group}/tests/ and bench/ edited, two added: "
                 "the artifact is not stale")
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
  configure("${EXAMPLE_DIR}" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}" "-DKILN_DIST_DIR=${DIST}" -C "${WORK_DIR}/groups.cmake")
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

# A runtime source changed since the build: the artifact's library is stale even though every
# kernel input is as recorded.
function(case_fixture_runtime_stale)
  set(FX_RUNTIME_SHA "2222222222222222222222222222222222222222222222222222222222222222")
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("is stale: input runtime/src/status.cpp of the runtime changed since the build"
                 "recorded ${FX_RUNTIME_SHA}"
                 "kiln build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm,softmax --clean")
endfunction()

# A runtime file added since the build, and metadata of a kiln that recorded no runtime_inputs
# (accepted, saying the runtime is not checked).
function(case_fixture_runtime_new_input)
  set(FX_DROP_INPUT "runtime/src/status.cpp")
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("is stale: runtime/src/status.cpp is new since the build (the artifact's "
                 "runtime_inputs do not list it)"
                 "kiln build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm,softmax --clean")
  set(FX_NO_RUNTIME_INPUTS ON)
  write_fixture("${FIXTURES}" x86_64 sm_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_success()
  expect_output("records no runtime_inputs (an older kiln wrote it); the runtime's staleness is "
                "not checked")
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
    "no artifact ${FIXTURES}/aarch64/sm_90 and no kiln_aarch64_sm_90_cuda<major>.tar.gz in"
    "(present for aarch64: sm_110, sm_87)"
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

# A PTX artifact (compute_NN entries): found without TAG and by its tag, SM and PTX defines, the
# rebuild command names the compute_NN entries; a tag with a malformed entry is refused.
function(case_fixture_ptx)
  write_fixture("${FIXTURES}" x86_64 sm_80_compute_90)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_success()
  expect_output("probe: tag=sm_80_compute_90" "kiln: KILN_ARTIFACT_SM_80 set" "kiln: KILN_ARTIFACT_SM_90 set"
                "kiln: KILN_ARTIFACT_PTX_90 set"
                "kiln: imported x86_64/sm_80_compute_90: 2 groups, 3 variants, SMs 80 90")
  if(OUTPUT MATCHES "KILN_ARTIFACT_PTX_80")
    fail("sm_80 is a cubin entry: KILN_ARTIFACT_PTX_80 must not be set")
  endif()
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64" "-DPROBE_TAG=sm_80_compute_90"
            "-DPROBE_GROUPS=fmha")
  expect_failure(
    "kiln build --gpu-arch sm_80,compute_90 --arch x86_64 --kernels rmsnorm,softmax,fmha --clean")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64" "-DPROBE_TAG=compute_9x")
  expect_failure("TAG 'compute_9x' is neither an artifact tag (sm_90, sm_87_sm_90, compute_80)")
endfunction()

# ---------------------------------------------------------------------------------------------
# Prebuilt tarballs (DIST_DIR).

# The real artifact (ARTIFACTS_DIR, built by the shared fixture test) copied to
# <root>/<arch>/<tag>; REAL_ARCH and REAL_TAG in the caller.
function(copy_real_artifact root)
  file(GLOB metadata "${ARTIFACTS_DIR}/*/*/metadata.json")
  list(LENGTH metadata n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "FAIL (${CASE}): expected one artifact under ${ARTIFACTS_DIR}, found ${n}")
  endif()
  get_filename_component(dir "${metadata}" DIRECTORY)
  get_filename_component(tag "${dir}" NAME)
  get_filename_component(arch_dir "${dir}" DIRECTORY)
  get_filename_component(arch "${arch_dir}" NAME)
  file(REMOVE_RECURSE "${root}/${arch}/${tag}")
  file(MAKE_DIRECTORY "${root}/${arch}")
  file(COPY "${dir}" DESTINATION "${root}/${arch}")
  set(REAL_ARCH "${arch}" PARENT_SCOPE)
  set(REAL_TAG "${tag}" PARENT_SCOPE)
endfunction()

# The real artifact packaged by `kiln package` into DIST, with no expanded directory;
# REAL_ARCH, REAL_TAG and TARBALL in the caller.
function(package_real_artifact)
  copy_real_artifact("${WORK_DIR}/pack")
  execute_process(COMMAND "${KILN}" package "${WORK_DIR}/pack/${REAL_ARCH}/${REAL_TAG}"
                          --dist "${DIST}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FAIL (${CASE}): kiln package failed:\n${out}${err}")
  endif()
  set(REAL_ARCH "${REAL_ARCH}" PARENT_SCOPE)
  set(REAL_TAG "${REAL_TAG}" PARENT_SCOPE)
  set(TARBALL "${DIST}/kiln_${REAL_ARCH}_${REAL_TAG}_cuda13.tar.gz" PARENT_SCOPE)
endfunction()

# metadata.json of the artifact directory `dir` with string(JSON SET) applied: ARGN is the path
# of the member and, last, its new JSON value.
function(set_metadata dir)
  file(READ "${dir}/metadata.json" json)
  string(JSON json SET "${json}" ${ARGN})
  file(WRITE "${dir}/metadata.json" "${json}")
endfunction()

# No directory, the tarball `kiln package` wrote: verified and extracted by kiln-verify,
# imported, no staging left; the next configure verifies the directory and checks it against its
# tarball. A CUDA major that no tarball has is refused with what is there.
function(case_tarball_ok)
  package_real_artifact()
  set(args "${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}")
  set(dir "${FIXTURES}/${REAL_ARCH}/${REAL_TAG}")
  configure(${args})
  expect_success()
  expect_output("kiln: extracted ${TARBALL} -> ${dir} (verified by kiln-verify)"
                "kiln: ok: ${dir}: ${REAL_ARCH} ${REAL_TAG} (CUDA 13." "kiln: KILN_RMSNORM_ENABLED set"
                "kiln: imported ${REAL_ARCH}/${REAL_TAG}: 1 groups" "probe: dir=${dir}")
  file(GLOB leftovers "${FIXTURES}/${REAL_ARCH}/.*")
  if(NOT EXISTS "${dir}/metadata.json" OR NOT leftovers STREQUAL "")
    fail("expected ${dir} and nothing else (left: ${leftovers})")
  endif()

  configure(${args})
  expect_success()
  expect_output("kiln: ${dir} is the artifact of ${TARBALL} (fingerprint ")
  expect_no_output("kiln: extracted")

  file(REMOVE_RECURSE "${dir}")
  configure(${args} "-DKILN_CUDA_MAJOR=12")
  expect_failure("no ${DIST}/kiln_${REAL_ARCH}_${REAL_TAG}_cuda12.tar.gz (CUDA 12, from "
                 "KILN_CUDA_MAJOR)" "has kiln_${REAL_ARCH}_${REAL_TAG}_cuda13.tar.gz")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})
endfunction()

# One flipped byte, no sidecar, a sidecar naming another file: refused by kiln-verify before the
# tarball is read; nothing is extracted.
function(case_tarball_checksum)
  package_real_artifact()
  set(args "${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}")
  file(STRINGS "${TARBALL}.sha256" line)
  string(SUBSTRING "${line}" 0 64 recorded)
  file(COPY_FILE "${TARBALL}" "${WORK_DIR}/good.tar.gz")
  flip_byte("${TARBALL}" 40)
  configure(${args})
  set(refused "kiln-verify: error: refusing to extract ${TARBALL}; nothing was written")
  expect_failure("${refused}" "${TARBALL}: sha256"
                 "but kiln_${REAL_ARCH}_${REAL_TAG}_cuda13.tar.gz.sha256 records ${recorded}"
                 "nothing was extracted")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})

  file(COPY_FILE "${WORK_DIR}/good.tar.gz" "${TARBALL}")
  file(REMOVE "${TARBALL}.sha256")
  configure(${args})
  expect_failure("${refused}" "${TARBALL}: checksum file ${TARBALL}.sha256 is missing")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})

  file(WRITE "${TARBALL}.sha256" "${recorded}  kiln_${REAL_ARCH}_sm_87_cuda13.tar.gz\n")
  configure(${args})
  expect_failure("${refused}" "${TARBALL}.sha256: names "
                 "'kiln_${REAL_ARCH}_sm_87_cuda13.tar.gz', expected")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})
endfunction()

# A committed hostile tarball (fixtures/), with a valid sidecar: refused for `why`, nothing written.
function(refuse_committed name why)
  set(tarball "${DIST}/kiln_x86_64_sm_90_cuda13.tar.gz")
  configure_file("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/fixtures/${name}.tar.gz" "${tarball}"
                 COPYONLY)
  write_sidecar("${tarball}")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=x86_64")
  expect_failure("kiln-verify: error: refusing to extract ${tarball}; nothing was written"
                 "kiln_x86_64_sm_90_cuda13.tar.gz: entry '${why}")
  expect_nothing_extracted(x86_64 sm_90)
endfunction()

# The real artifact in WORK_DIR/pack/<arch>/<tag>, edited by the caller, tarred by `cmake -E tar`
# (kiln package would refuse it) with `extra` entries (relative to pack/<arch>), as `name` in DIST
# with a matching sidecar, so the checksum passes and what follows must refuse it.
function(pack_hostile name)
  set(tarball "${DIST}/${name}")
  file(MAKE_DIRECTORY "${DIST}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar czf "${tarball}" "${REAL_TAG}" ${ARGN}
                  WORKING_DIRECTORY "${WORK_DIR}/pack/${REAL_ARCH}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FAIL (${CASE}): cmake -E tar could not write ${tarball}")
  endif()
  write_sidecar("${tarball}")
endfunction()

# Hostile entries: `../x`, `<tag>/../x` and a symlink (made here from the real artifact), an
# absolute path, a hard link and a fifo (committed fixtures, see fixtures/README.md). kiln-verify
# refuses each before anything is written, anywhere.
function(case_tarball_entries)
  copy_real_artifact("${WORK_DIR}/pack")
  set(name "kiln_${REAL_ARCH}_${REAL_TAG}_cuda13.tar.gz")
  set(tarball "${DIST}/${name}")
  set(args "${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}")
  file(WRITE "${WORK_DIR}/pack/evil" "outside\n")
  pack_hostile("${name}" ../evil)
  configure(${args})
  expect_failure("kiln-verify: error: refusing to extract ${tarball}; nothing was written"
                 "${name}: entry '../evil': '..' component")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})
  if(EXISTS "${FIXTURES}/evil" OR EXISTS "${FIXTURES}/${REAL_ARCH}/evil")
    fail("../evil was written")
  endif()

  pack_hostile("${name}" ${REAL_TAG}/../../evil)
  configure(${args})
  expect_failure("entry '${REAL_TAG}/../../evil': '..' component")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})

  file(CREATE_LINK /etc/passwd "${WORK_DIR}/pack/${REAL_ARCH}/${REAL_TAG}/include/kiln/passwd"
       SYMBOLIC)
  pack_hostile("${name}")
  configure(${args})
  expect_failure("entry '${REAL_TAG}/include/kiln/passwd' is a symlink to '/etc/passwd'")
  expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})

  set(absolute /tmp/kiln-e2e-absolute-entry)
  file(REMOVE "${absolute}")
  file(REMOVE_RECURSE "${DIST}")
  refuse_committed(absolute_path "${absolute}': absolute path")
  refuse_committed(hardlink "sm_90/lib/libkiln.a' is a hardlink")
  refuse_committed(fifo "sm_90/fifo' is a fifo")
  if(EXISTS "${absolute}")
    fail("${absolute} was written")
  endif()
endfunction()

# An expanded directory whose fingerprint disagrees with its tarball: refused, naming both and
# the fixes; the check against the sources still runs on a just-extracted tarball.
function(case_tarball_stale_dir)
  package_real_artifact()
  copy_real_artifact("${FIXTURES}")
  set(dir "${FIXTURES}/${REAL_ARCH}/${REAL_TAG}")
  set(other "1111111111111111111111111111111111111111111111111111111111111111")
  set_metadata("${dir}" fingerprint "\"${other}\"")
  set_metadata("${dir}" build_date "\"2025-02-02T00:00:00Z\"")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}")
  expect_failure(
    "kiln: expanded artifact ${dir} disagrees with its tarball ${TARBALL}"
    "directory metadata.json fingerprint ${other} (built 2025-02-02T00:00:00Z)"
    "tarball metadata.json fingerprint "
    "use the tarball: delete ${dir}"
    "kiln build --gpu-arch ${REAL_TAG} --arch ${REAL_ARCH} --kernels rmsnorm --clean")

  # Extracted, then stale against a checkout whose kiln.toml differs from the recorded one.
  file(REMOVE_RECURSE "${dir}")
  set(root "${WORK_DIR}/checkout")
  file(COPY "${REPO_DIR}/runtime" DESTINATION "${root}")
  file(COPY "${REPO_DIR}/kernels/common" "${REPO_DIR}/kernels/rmsnorm"
       DESTINATION "${root}/kernels")
  file(APPEND "${root}/kernels/rmsnorm/kiln.toml" "# edited\n")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}" "-DKILN_SOURCE_ROOT=${root}")
  expect_failure("kiln: extracted" "is stale: input kernels/rmsnorm/kiln.toml of variant")
endfunction()

# Issue 32: tarballs and directories that `kiln verify` refuses and the import once took, each
# made from the real artifact. A tarball: the configure fails with kiln-verify's message and
# nothing appears in the artifacts tree. A directory: the configure fails with its message.
function(case_hostile)
  set(args "${PROBE_DIR}" ${PROBE_ARGS})
  # Tarballs: the edit (a CMake snippet run on the pack copy `d`), what kiln-verify says, and the
  # tarball's name when it is not kiln's own.
  set(cases
    "swapped_cubins|swap|.sm_90.cubin: sha256 "
    "extra_executable|chmod|kiln_all.h' is executable"
    "trailing_garbage|garbage|metadata.json is not valid JSON"
    "invalid_utf8|utf8|metadata.json is not valid JSON"
    "deep_json|deep|metadata.json nests more than 64 levels deep"
    "group_outside|group|group name '../../usr/include' must match [a-z][a-z0-9]*"
    "input_outside|input|path '../../../../../../../dev/zero': '..' component"
    "library_size|size|lib/libkiln.a: "
    "header_edited|header|include/kiln/kiln_all.h: sha256 "
    "doctor_edited|doctor|bin/kiln-doctor: "
    "thin_archive|thin|thin archive"
    "cuda_major|none|file name says cuda12, metadata.json's cuda_version is 13.")
  foreach(entry IN LISTS cases)
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 0 what)
    list(GET entry 1 edit)
    list(GET entry 2 says)
    copy_real_artifact("${WORK_DIR}/pack")
    set(d "${WORK_DIR}/pack/${REAL_ARCH}/${REAL_TAG}")
    set(major 13)
    file(GLOB cubins "${d}/cubins/*.cubin")
    list(GET cubins 0 first)
    list(GET cubins 1 second)
    file(READ "${d}/metadata.json" json)
    if(edit STREQUAL "swap")
      file(RENAME "${first}" "${d}/swap")
      file(RENAME "${second}" "${first}")
      file(RENAME "${d}/swap" "${second}")
    elseif(edit STREQUAL "chmod")
      file(CHMOD "${d}/include/kiln/kiln_all.h" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
    elseif(edit STREQUAL "garbage")
      file(APPEND "${d}/metadata.json" "}\n{\"schema_version\": 2}")
    elseif(edit STREQUAL "utf8")
      string(ASCII 255 byte)
      string(REPLACE "\"build_date\": \"" "\"build_date\": \"${byte}" json "${json}")
      file(WRITE "${d}/metadata.json" "${json}")
    elseif(edit STREQUAL "deep")
      string(REPEAT "[" 1000 open)
      string(REPEAT "]" 1000 close)
      file(WRITE "${d}/metadata.json" "{\"schema_version\": 1, \"x\": ${open}${close}}")
    elseif(edit STREQUAL "group")
      string(JSON group MEMBER "${json}" groups 0)
      string(JSON members GET "${json}" groups ${group})
      string(JSON json REMOVE "${json}" groups ${group})
      string(JSON json SET "${json}" groups "../../usr/include" "${members}")
      string(JSON n LENGTH "${json}" variants)
      math(EXPR last "${n} - 1")
      foreach(i RANGE ${last})
        string(JSON variant MEMBER "${json}" variants ${i})
        string(JSON json SET "${json}" variants ${variant} group "\"../../usr/include\"")
      endforeach()
      file(WRITE "${d}/metadata.json" "${json}")
    elseif(edit STREQUAL "input")
      string(JSON variant MEMBER "${json}" variants 0)
      set(zero "0000000000000000000000000000000000000000000000000000000000000000")
      set_metadata("${d}" variants ${variant} inputs "../../../../../../../dev/zero" "\"${zero}\"")
    elseif(edit STREQUAL "size")
      string(JSON size GET "${json}" library size)
      math(EXPR size "${size} + 1")
      set_metadata("${d}" library size ${size})
    elseif(edit STREQUAL "header")
      file(APPEND "${d}/include/kiln/kiln_all.h" "#define KILN_EVIL 1\n")
    elseif(edit STREQUAL "doctor")
      file(APPEND "${d}/bin/kiln-doctor" "x")
    elseif(edit STREQUAL "thin")
      file(WRITE "${d}/lib/libkiln.a" "!<thin>\n")
      file(SHA256 "${d}/lib/libkiln.a" sha)
      set_metadata("${d}" library sha256 "\"${sha}\"")
      set_metadata("${d}" library size 8)
    elseif(edit STREQUAL "none")
      set(major 12)
    endif()

    # As a directory: refused by the verifier, before anything of it is read (a file name and
    # execute bits are a tarball's alone).
    file(REMOVE_RECURSE "${FIXTURES}" "${DIST}")
    if(NOT edit MATCHES "^(none|chmod)$")
      file(MAKE_DIRECTORY "${FIXTURES}/${REAL_ARCH}")
      file(COPY "${d}" DESTINATION "${FIXTURES}/${REAL_ARCH}")
      configure(${args} "-DPROBE_ARCH=${REAL_ARCH}")
      expect_failure("kiln-verify: error: " "${says}"
                     "(kiln-verify refused the artifact ${FIXTURES}/${REAL_ARCH}/${REAL_TAG}")
      file(REMOVE_RECURSE "${FIXTURES}")
    endif()

    # As a tarball: refused, and nothing is written into the artifacts tree.
    set(name "kiln_${REAL_ARCH}_${REAL_TAG}_cuda${major}.tar.gz")
    pack_hostile("${name}")
    configure(${args} "-DPROBE_ARCH=${REAL_ARCH}")
    expect_failure("kiln-verify: error: refusing to extract ${DIST}/${name}; nothing was written"
                   "${says}" "(kiln-verify refused ${DIST}/${name}; nothing was extracted)")
    expect_nothing_extracted(${REAL_ARCH} ${REAL_TAG})
    message(STATUS "${what}: refused as a directory and as a tarball")
  endforeach()
endfunction()

# No KILN_VERIFY_EXECUTABLE: the module builds kiln-verify from this checkout's sources into the
# build tree, runs it on the real artifact, and a second configure reuses it.
function(case_verifier_from_sources)
  copy_real_artifact("${FIXTURES}")
  set(VERIFIER "")
  set(args "${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=${REAL_ARCH}")
  find_program(ccache ccache)
  if(ccache)
    list(APPEND args "-DCMAKE_CXX_COMPILER_LAUNCHER=${ccache}")
  endif()
  configure(${args})
  expect_success()
  expect_output("kiln: building kiln-verify from ${REPO_DIR}/tools/kiln-verify"
                "kiln: ok: ${FIXTURES}/${REAL_ARCH}/${REAL_TAG}: ")
  if(NOT EXISTS "${WORK_DIR}/build/CMakeFiles/kiln-verify/kiln-verify")
    fail("no kiln-verify in ${WORK_DIR}/build/CMakeFiles/kiln-verify")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" "${WORK_DIR}/build"
                  RESULT_VARIABLE RESULT OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  expect_success()
  expect_no_output("kiln: building kiln-verify")
  expect_output("kiln: ok: ${FIXTURES}/${REAL_ARCH}/${REAL_TAG}: ")

  set(VERIFIER "${WORK_DIR}/not-a-verifier")
  file(WRITE "${VERIFIER}" "")
  configure(${args})
  expect_failure("--version said" "expected 'kiln-verify ")
endfunction()

# Tag resolution over tarballs: two tags and no TAG lists both; a platform name picks one; two
# CUDA majors of one tag with no toolkit and no KILN_CUDA_MAJOR list both; KILN_CUDA_MAJOR picks.
function(case_tarball_tags)
  pack_fixture(aarch64 sm_87)
  pack_fixture(aarch64 sm_110)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64")
  expect_failure("2 artifacts under ${FIXTURES}/aarch64/ or in ${DIST}/ "
                 "(sm_110 (kiln_aarch64_sm_110_cuda13.tar.gz), "
                 "sm_87 (kiln_aarch64_sm_87_cuda13.tar.gz)); pass TAG")
  expect_nothing_extracted(aarch64 sm_87)

  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DPROBE_TAG=jetson-orin")
  expect_success()
  expect_output("kiln: platform jetson-orin -> sm_87"
                "kiln: extracted ${DIST}/kiln_aarch64_sm_87_cuda13.tar.gz" "probe: tag=sm_87")
  file(REMOVE_RECURSE "${FIXTURES}")

  file(REMOVE "${DIST}/kiln_aarch64_sm_110_cuda13.tar.gz")
  set(FX_CUDA_MAJOR 12)
  set(FX_CUDA_VERSION 12.8.61)
  pack_fixture(aarch64 sm_87)
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64")
  expect_failure("2 tarballs of aarch64/sm_87 in ${DIST} (kiln_aarch64_sm_87_cuda12.tar.gz, "
                 "kiln_aarch64_sm_87_cuda13.tar.gz) and no CUDA major")
  configure("${PROBE_DIR}" ${PROBE_ARGS} "-DPROBE_ARCH=aarch64" "-DKILN_CUDA_MAJOR=12")
  expect_success()
  expect_output("kiln: extracted ${DIST}/kiln_aarch64_sm_87_cuda12.tar.gz")
endfunction()

# A static library that imports the artifact in a subdirectory, linked by an executable in the
# top directory: the link line carries libkiln.a and the dl library, and the program runs.
function(case_static_lib)
  configure("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/static_lib" "-DKILN_ARTIFACTS_DIR=${ARTIFACTS_DIR}"
            "-DKILN_DIST_DIR=${DIST}")
  expect_success()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --verbose
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  if(NOT result EQUAL 0)
    fail("the static-library consumer does not link")
  endif()
  string(REGEX MATCH "[^\n]*-o app [^\n]*" link "${OUTPUT}")
  if(NOT link MATCHES "libengine\\.a" OR NOT link MATCHES "libkiln\\.a" OR NOT link MATCHES "-ldl")
    fail("the executable's link line lacks libengine.a, libkiln.a or -ldl: ${link}")
  endif()
  message(STATUS "link line: ${link}")
  execute_process(COMMAND "${WORK_DIR}/build/app" RESULT_VARIABLE result OUTPUT_VARIABLE OUTPUT)
  if(NOT result EQUAL 0)
    fail("app exited ${result}")
  endif()
  expect_output("engine: artifact ")
endfunction()

# The cross build end to end: the real kiln builds an aarch64 sm_87 rmsnorm artifact, packages it
# when `kiln package` exists (then the directory is removed so the consumer extracts the tarball),
# and examples/consumer configures with the aarch64 toolchain file, TAG jetson-orin and no CUDA
# runtime, and links; the program is an aarch64 ELF (e_machine 183).
function(case_cross_aarch64)
  find_program(cross_cxx aarch64-linux-gnu-g++)
  if(NOT cross_cxx)
    message(STATUS "kiln-test-skip: aarch64-linux-gnu-g++ not found (apt-get install "
                   "g++-aarch64-linux-gnu)")
    return()
  endif()
  set(artifacts "${WORK_DIR}/artifacts")
  execute_process(COMMAND "${KILN}" build --gpu-arch sm_87 --arch aarch64 --kernels rmsnorm
                          --clean -j 2 --output-dir "${artifacts}" --root "${REPO_DIR}"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  if(NOT result EQUAL 0)
    fail("kiln build --arch aarch64 failed")
  endif()
  execute_process(COMMAND "${KILN}" --help OUTPUT_VARIABLE help ERROR_QUIET)
  set(dist "${WORK_DIR}/dist")
  if(help MATCHES "\n  package ")
    execute_process(COMMAND "${KILN}" package "${artifacts}/aarch64/sm_87" --dist "${dist}"
                    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    set(OUTPUT "${out}${err}")
    if(NOT result EQUAL 0)
      fail("kiln package failed")
    endif()
    file(REMOVE_RECURSE "${artifacts}/aarch64/sm_87")
    set(from_tarball ON)
  endif()

  file(REMOVE_RECURSE "${WORK_DIR}/build")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${EXAMPLE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
            "-DCMAKE_TOOLCHAIN_FILE=${REPO_DIR}/cmake/toolchains/aarch64-linux-gnu.cmake"
            "-DKiln_DIR=${REPO_DIR}/cmake" "-DKILN_VERIFY_EXECUTABLE=${VERIFIER}"
            "-DKILN_ARTIFACTS_DIR=${artifacts}"
            "-DKILN_DIST_DIR=${dist}" -DKILN_TAG=jetson-orin -DKILN_CONSUMER_CUDART=OFF
    RESULT_VARIABLE RESULT OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  expect_success()
  expect_output("kiln: platform jetson-orin -> sm_87" "kiln: KILN_RMSNORM_ENABLED set"
                "kiln: imported aarch64/sm_87: 1 groups")
  if(from_tarball)
    expect_output("kiln: extracted ${dist}/kiln_aarch64_sm_87_cuda")
  endif()
  expect_no_output("importing an aarch64 artifact into a build for")
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(OUTPUT "${out}${err}")
  if(NOT result EQUAL 0)
    fail("examples/consumer does not cross-link for aarch64")
  endif()
  set(program "${WORK_DIR}/build/kiln_consumer")
  file(READ "${program}" magic LIMIT 4 HEX)
  file(READ "${program}" machine OFFSET 18 LIMIT 2 HEX)  # e_machine, little endian
  if(NOT magic STREQUAL "7f454c46" OR NOT machine STREQUAL "b700")
    fail("${program}: ELF magic ${magic}, e_machine bytes ${machine}; expected 7f454c46, b700 "
         "(183, aarch64)")
  endif()
  message(STATUS "${program}: ELF, e_machine 183 (aarch64); from tarball: ${from_tarball}")
endfunction()

if(NOT COMMAND case_${CASE})
  message(FATAL_ERROR "consumer_test.cmake: unknown CASE '${CASE}'")
endif()
cmake_language(CALL case_${CASE})
message(STATUS "PASS (${CASE})")
