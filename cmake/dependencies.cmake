# Every library and tool the build needs, each with the Debian package that provides it.
# Nothing here fails: what is missing is collected in INGOT_MISSING_WHAT and INGOT_MISSING_PACKAGES,
# and the top-level CMakeLists.txt stops with one line naming every package to install, instead of
# CMake's page of call stack from inside a package's own config file. scripts/bootstrap.sh installs the
# same packages; keep the two lists in step (scripts/fresh-machine-check.sh proves they are).

set(INGOT_MISSING_PACKAGES "")
set(INGOT_MISSING_WHAT "")

macro(ingot_missing what debian_package)
  list(APPEND INGOT_MISSING_WHAT "${what}")
  list(APPEND INGOT_MISSING_PACKAGES "${debian_package}")
endmacro()

# ingot_require(<find_package name> <Debian package> [find_package arguments...])
# A macro, not a function: find_package's variables (OpenBLAS_LIBRARIES...) must reach the caller.
macro(ingot_require name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    ingot_missing("${name}" "${debian_package}")
  endif()
endmacro()

# ingot_require_program(<variable> <program> <Debian package>)
macro(ingot_require_program variable program debian_package)
  find_program(${variable} ${program})
  if(NOT ${variable})
    ingot_missing("${program}" "${debian_package}")
  endif()
endmacro()

ingot_require(Threads build-essential)
ingot_require(OpenMP build-essential)
ingot_require(fmt libfmt-dev)
ingot_require(Protobuf libprotobuf-dev)
ingot_require(ONNX libonnx-dev)
# Debian's oneDNN is built with the OpenCL GPU runtime, and its package config requires OpenCL's
# headers and loader (which libdnnl-dev only recommends): look for them first, since the config
# file's own failure cannot be made quiet.
ingot_require(OpenCL ocl-icd-opencl-dev)
if(OpenCL_FOUND)
  ingot_require(dnnl libdnnl-dev)
else()
  find_path(INGOT_DNNL_CONFIG_DIR dnnl-config.cmake PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl NO_DEFAULT_PATH)
  if(NOT INGOT_DNNL_CONFIG_DIR)
    ingot_missing(dnnl libdnnl-dev)
  endif()
endif()
ingot_require(nlohmann_json nlohmann-json3-dev)
ingot_require(CLI11 libcli11-dev CONFIG)
ingot_require(PNG libpng-dev)
ingot_require(JPEG libjpeg-dev)
# gzip-compressed datasets (Fashion-MNIST's idx files).
ingot_require(ZLIB zlib1g-dev)
# OpenBLAS's OpenMP build: its threads are OpenMP's, the team Ingot's and oneDNN's loops run on, and
# it may be called from several of them at once (cpu::gemm splits large products across the team:
# backends/cpu/kernels/gemm.h). The pthread build starts a second pool at library load whose threads
# spin (sched_yield) on the same cores through a process's first ~0.1 s, slowing cold starts at 2
# threads 2x in one run of three; the serial build is not safe to call from several threads ("BLAS :
# Bad memory unallocation", wrong products). Debian installs the variants side by side under one
# soname: the OpenMP one is found first here, and the build's RUNPATH names its directory.
ingot_require(OpenBLAS libopenblas-openmp-dev CONFIG
  HINTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/cmake/openblas)
# The package checksum (XXH64).
find_path(INGOT_XXHASH_INCLUDE_DIR xxhash.h)
find_library(INGOT_XXHASH_LIBRARY xxhash)
if(NOT INGOT_XXHASH_INCLUDE_DIR OR NOT INGOT_XXHASH_LIBRARY)
  ingot_missing(xxhash libxxhash-dev)
endif()
# The package format: FlatBuffers' headers and its schema compiler.
ingot_require(FlatBuffers libflatbuffers-dev CONFIG)
ingot_require_program(FLATC flatc flatbuffers-compiler)
# Data-parallel training on CPUs: Gloo, in the plugin libingot_gloo.so (opened only by a process
# that joins a "gloo" group; backends/cpu/gloo_plugin.h).
ingot_require(Gloo libgloo-dev CONFIG)
if(INGOT_BUILD_TESTS)
  ingot_require(GTest "libgtest-dev libgmock-dev")
endif()
# The Python module (`import ingot`, python/): Debian's python3 (not another one first on PATH),
# pybind11 and DLPack's header.
if(INGOT_PYTHON)
  if(NOT Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python COMPONENTS Interpreter Development.Module QUIET)
  if(NOT Python_Development.Module_FOUND)
    ingot_missing(Python.h python3-dev)
  endif()
  set(PYBIND11_FINDPYTHON ON)
  ingot_require(pybind11 pybind11-dev CONFIG)
  find_path(INGOT_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
  if(NOT INGOT_DLPACK_INCLUDE_DIR)
    ingot_missing(dlpack libdlpack-dev)
  endif()
endif()
if(INGOT_MISSING_PACKAGES)
  list(REMOVE_DUPLICATES INGOT_MISSING_PACKAGES)
  list(JOIN INGOT_MISSING_WHAT ", " INGOT_MISSING_WHAT)
  list(JOIN INGOT_MISSING_PACKAGES " " INGOT_MISSING_PACKAGES)
endif()
