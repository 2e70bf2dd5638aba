# Kernel routes over rtnetlink (routing.install_kernel_routes). Included from
# agent/runtime/CMakeLists.txt; linked into the agent runtime and its tests.
add_library(mesh_kernel_routes STATIC
  ${CMAKE_CURRENT_LIST_DIR}/kernel_routes.cc
  ${CMAKE_CURRENT_LIST_DIR}/netlink_socket.cc
)
target_include_directories(mesh_kernel_routes PUBLIC ${MESH_SOURCE_ROOT})
target_link_libraries(mesh_kernel_routes PUBLIC mesh_core PRIVATE mesh_warnings)
