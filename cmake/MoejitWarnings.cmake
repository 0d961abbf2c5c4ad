# Warnings live on an INTERFACE target that every moejit target links; CI adds -Werror.
add_library(moejit_warnings INTERFACE)
target_compile_options(moejit_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor -Wpedantic
  # Designated initializers leave the unnamed fields at their defaults on purpose.
  -Wno-missing-field-initializers
  $<$<BOOL:${MOEJIT_WERROR}>:-Werror>)
