# Included by tests/CMakeLists.txt (both with and without TETHER_PQ).
# Layering: each layer's include path holds only its own folder and those
# below it (TETHER_LAYER_DIRS_<layer>, the path the layer is built with).
# For every layer, one probe per header of another layer, compiled with the
# layer's path: a header from above must fail to compile, one from below
# must compile. The command line and the lab see the public headers only
# (their paths, TETHER_LAYER_DIRS_cli and _lab, are set beside tether_cli).
set(TETHER_LAYER_HEADER_core internal.h)
set(TETHER_LAYER_HEADER_conninfo conninfo.h)
set(TETHER_LAYER_HEADER_policy backoff.h)
set(TETHER_LAYER_HEADER_drivers driver.h)
set(TETHER_LAYER_HEADER_discovery discovery.h)
set(TETHER_LAYER_HEADER_connector connector.h)
set(TETHER_LAYER_HEADER_pool pool.h)
set(TETHER_LAYER_HEADER_admin admin.h)
set(probes "")
foreach(layer ${TETHER_LAYERS} cli lab)
  list(FIND TETHER_LAYERS ${layer} li)
  foreach(other core conninfo policy drivers discovery connector pool admin)
    list(FIND TETHER_LAYERS ${other} oi)
    if(other STREQUAL layer)
      continue()
    elseif(li GREATER_EQUAL 0 AND oi LESS li)
      set(expect pass)
    else()
      set(expect fail)
    endif()
    set(flags "")
    foreach(d ${TETHER_LAYER_DIRS_${layer}} ${LIBPQ_INCLUDE_DIRS})
      string(APPEND flags " -I${d}")
    endforeach()
    string(APPEND probes
      "${layer} ${TETHER_LAYER_HEADER_${other}} ${expect}${flags}\n")
  endforeach()
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/layer-probes.txt "${probes}")
add_test(NAME build.layers COMMAND bash
         ${CMAKE_CURRENT_LIST_DIR}/check.sh ${CMAKE_C_COMPILER}
         ${CMAKE_CURRENT_BINARY_DIR}/layer-probes.txt)
set_tests_properties(build.layers PROPERTIES LABELS "build" TIMEOUT 120)

# The same rule judged on what links: each layer's object files may use
# symbols of their own layer or below only (layers/symbols.sh), and the
# check first proves that it refuses a planted upward call.
set(layer_objects "")
foreach(layer ${TETHER_LAYERS})
  string(APPEND layer_objects
    "${layer} $<JOIN:$<TARGET_OBJECTS:tether_${layer}>,\n${layer} >\n")
endforeach()
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/layer-objects.txt
     CONTENT "${layer_objects}")
add_test(NAME build.layer_symbols COMMAND bash
         ${CMAKE_CURRENT_LIST_DIR}/symbols.sh
         ${CMAKE_CURRENT_BINARY_DIR}/layer-objects.txt)
set_tests_properties(build.layer_symbols PROPERTIES LABELS "build" TIMEOUT 60
  ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
