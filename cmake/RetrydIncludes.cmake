# retryd_root_include(TARGET...): each TARGET's own sources may include
# headers by their path from the repository root ("server/engine/...",
# "client/...", "tests/..."). PRIVATE, so that no target hands the root on:
# a target reaches another's headers through a link it declares, and
# scripts/check_layers.py (ctest: build_layers) checks that it does.
function(retryd_root_include)
  foreach(target IN LISTS ARGN)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  endforeach()
endfunction()
