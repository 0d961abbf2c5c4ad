# The `moejit` Python module (nanobind): MOEJIT_BUILD_PYTHON, ON where nanobind is found for the
# chosen Python (Python_EXECUTABLE; scripts/build passes the venv scripts/install-deps makes),
# OFF otherwise with a message. The module and a copy of python/moejit/ go to
# <build>/python/moejit, so the tests import the package from the build tree without `pip install`.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS "${PROJECT_BINARY_DIR}/venv/bin/python3")
  set(Python_EXECUTABLE "${PROJECT_BINARY_DIR}/venv/bin/python3" CACHE FILEPATH "Python for the moejit module")
endif()

set(moejit_python_default OFF)
set(moejit_python_why "")
# NOTE: the stable ABI (one module for every CPython from 3.12 on) needs CMake 3.26's SABIModule;
# with Debian 12's CMake 3.25 the module is for the one Python version it was built with.
set(moejit_python_optional)
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.26)
  set(moejit_python_optional OPTIONAL_COMPONENTS Development.SABIModule)
endif()
find_package(Python 3.9 COMPONENTS Interpreter Development.Module ${moejit_python_optional})
if(NOT Python_FOUND)
  set(moejit_python_why "no Python interpreter with its development headers (python3-dev)")
else()
  execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                  OUTPUT_VARIABLE moejit_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE moejit_no_nanobind ERROR_QUIET)
  if(moejit_no_nanobind)
    set(moejit_python_why "no nanobind for ${Python_EXECUTABLE} (scripts/install-deps installs it into build/venv)")
  else()
    set(moejit_python_default ON)
  endif()
endif()
option(MOEJIT_BUILD_PYTHON "Build the moejit Python module (nanobind)" ${moejit_python_default})
if(MOEJIT_BUILD_PYTHON AND NOT moejit_python_default)
  message(FATAL_ERROR "MOEJIT_BUILD_PYTHON is ON but ${moejit_python_why}")
endif()
if(NOT MOEJIT_BUILD_PYTHON)
  if(moejit_python_why)
    message(STATUS "moejit: the Python module is not built: ${moejit_python_why}")
  endif()
  return()
endif()
message(STATUS "moejit: the Python module is built for ${Python_EXECUTABLE} (Python ${Python_VERSION})")
list(APPEND CMAKE_PREFIX_PATH "${moejit_nanobind_dir}")
find_package(nanobind CONFIG REQUIRED)
