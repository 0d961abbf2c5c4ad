# Dependency lookup. Everything here is either header-only or part of the CUDA toolkit, so a
# binary built on a Debian machine runs on the GPU machine with only libc/libstdc++, NVRTC and
# NCCL as shared libraries. The CUDA driver is never linked: runtime/ dlopens libcuda.so.1.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

find_package(Threads REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(CUDAToolkit 12.8 REQUIRED)

# xxHash: header-only (XXH_INLINE_ALL), so no libxxhash.so travels with the binaries.
find_path(MOEJIT_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
add_library(moejit_xxhash INTERFACE)
target_include_directories(moejit_xxhash SYSTEM INTERFACE "${MOEJIT_XXHASH_INCLUDE_DIR}")
target_compile_definitions(moejit_xxhash INTERFACE XXH_INLINE_ALL)

# RapidJSON: header-only; it reads the cache's manifests (cache/manifest.cpp says why).
find_path(MOEJIT_RAPIDJSON_INCLUDE_DIR rapidjson/document.h REQUIRED)
add_library(moejit_rapidjson INTERFACE)
target_include_directories(moejit_rapidjson SYSTEM INTERFACE "${MOEJIT_RAPIDJSON_INCLUDE_DIR}")

# NCCL ships inside the CUDA toolkit on both machines.
find_library(MOEJIT_NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS "${CUDAToolkit_LIBRARY_DIR}" REQUIRED)
find_path(MOEJIT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
add_library(moejit_nccl INTERFACE)
target_include_directories(moejit_nccl SYSTEM INTERFACE "${MOEJIT_NCCL_INCLUDE_DIR}")
target_link_libraries(moejit_nccl INTERFACE "${MOEJIT_NCCL_LIBRARY}")

# cuda.h for the driver API's types only; nothing links libcuda.
add_library(moejit_cuda_headers INTERFACE)
target_include_directories(moejit_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})

# The toolkit's lib64 goes into the rpath so that libnvrtc.so.13 and libnccl.so.2 are found on
# the GPU machine too (same /usr/local/cuda layout there).
set(CMAKE_BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
set(CMAKE_INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")

if(MOEJIT_BUILD_TESTS)
  find_package(Catch2 2.13 REQUIRED)
  find_package(Python3 3.9 REQUIRED COMPONENTS Interpreter)
  find_program(MOEJIT_FILECHECK NAMES FileCheck FileCheck-14
               HINTS /usr/lib/llvm-14/bin REQUIRED)
  find_file(MOEJIT_LIT NAMES lit.py HINTS /usr/lib/llvm-14/build/utils/lit REQUIRED)
endif()
