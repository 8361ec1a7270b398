# Every third-party library comes from Debian packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(ONNX REQUIRED)
# Debian's dnnl-config.cmake insists on OpenCL headers for its GPU runtime, which we do not use:
# import the CPU library directly.
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR dnnl.hpp REQUIRED)
add_library(DNNL::dnnl SHARED IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
find_package(simdjson REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)

# CUDA is optional: with a toolkit the GPU backend is compiled (its tests skip without a GPU).
set(MODELFLEET_HAVE_CUDA OFF)
if(MODELFLEET_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  elseif(NOT CMAKE_CUDA_COMPILER AND EXISTS ${CMAKE_SOURCE_DIR}/.cache/cuda/toolkit/bin/nvcc)
    # No installed toolkit: NVIDIA's CUDA 13 PyPI wheels, which scripts/install-deps.sh lays out
    # as one toolkit root (requirements/cuda.txt).
    file(REAL_PATH ${CMAKE_SOURCE_DIR}/.cache/cuda/toolkit CUDAToolkit_ROOT)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_ROOT}/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # CMake 3.25.1's FindCUDAToolkit sets a property on CUDA::nvToolsExt even when the library is
    # missing, as it is from CUDA 13 (nvtx3 is header-only): give it an empty target to set it on.
    if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
      add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(MODELFLEET_HAVE_CUDA ON)
    # Hopper (H100/H200), the GPUs we serve on: sm_90 machine code plus PTX for later GPUs.
    set(MODELFLEET_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures of the GPU backend")
    # CMake 3.25 does not know nvcc 13's C++20 flag; it is the same as the host compiler's.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    # One CUDA runtime per process: the shared one, as CUDA::cudart and the libraries use.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_FLAGS_RELEASE "-O3")  # assertions stay on, as in the C++ build
  endif()
endif()
message(STATUS "ModelFleet: CUDA backend ${MODELFLEET_HAVE_CUDA}")
