# The Debian package (issue 15): `cpack --config BUILD/CPackConfig.cmake` makes
# meshagent_VERSION-RELEASE_ARCH.deb from the install rules below; scripts/package
# wraps it (and scripts/cross-build for arm64).
#
# Why CPack and not debian/ + dpkg-buildpackage: the package comes straight from
# the CMake build that CI and the cross build already run (the same toolchain
# file, the same targets), with no second build description to keep in step and
# no debhelper/sbuild chroot to install; cross-building is a toolchain file
# away. What debhelper would have generated (maintainer scripts for the user
# and the systemd units, conffiles, compressed man pages and changelog, stripped
# binaries, shlibs Depends) is written out in deploy/debian/ and below, and
# lintian checks the result (tests/deploy/package_test.sh).

set(MESH_DEB_RELEASE "1" CACHE STRING "Debian revision of the meshagent package")
set(MESH_DEB_VERSION "${PROJECT_VERSION}-${MESH_DEB_RELEASE}")
set(_deb ${CMAKE_CURRENT_LIST_DIR}/debian)
set(_gen ${CMAKE_BINARY_DIR}/deploy)
find_package(Python3 REQUIRED COMPONENTS Interpreter)

# Man pages from the --help texts (run under CMAKE_CROSSCOMPILING_EMULATOR,
# i.e. qemu-user, when cross-compiling).
set(_can_run_target TRUE)
if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(_can_run_target FALSE)
endif()
set(_man_pages)
foreach(program meshagent meshctl)
  add_custom_command(
    OUTPUT ${_gen}/${program}.1.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_gen}
    COMMAND ${Python3_EXECUTABLE} ${_deb}/man_from_help.py ${_gen}/${program}.1.gz 1 ${PROJECT_VERSION} --
            ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:${program}> --help
    DEPENDS ${program} ${_deb}/man_from_help.py
    COMMENT "Man page ${program}(1) from ${program} --help"
    VERBATIM)
  list(APPEND _man_pages ${_gen}/${program}.1.gz)
endforeach()
configure_file(${_deb}/changelog.in ${_gen}/changelog @ONLY)
add_custom_command(
  OUTPUT ${_gen}/changelog.Debian.gz
  COMMAND ${Python3_EXECUTABLE} ${_deb}/man_from_help.py --gzip ${_gen}/changelog ${_gen}/changelog.Debian.gz
  DEPENDS ${_gen}/changelog ${_deb}/man_from_help.py
  VERBATIM)
if(_can_run_target AND NOT MESH_FUZZ)
  add_custom_target(package_files ALL DEPENDS ${_man_pages} ${_gen}/changelog.Debian.gz)
else()
  add_custom_target(package_files DEPENDS ${_man_pages} ${_gen}/changelog.Debian.gz)
endif()

# Install layout (Debian 12 / Raspberry Pi OS bookworm).
install(TARGETS meshagent meshctl RUNTIME DESTINATION bin)
install(FILES ${_man_pages} DESTINATION share/man/man1)
install(FILES ${_deb}/agent.toml DESTINATION /etc/meshagent PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/systemd/meshagent.service ${CMAKE_CURRENT_LIST_DIR}/systemd/meshagent-prometheus.service
              ${CMAKE_CURRENT_LIST_DIR}/systemd/meshagent-prometheus.timer
        DESTINATION /lib/systemd/system)
install(PROGRAMS ${_deb}/prometheus-textfile DESTINATION libexec/meshagent)
install(FILES ${_deb}/copyright ${_gen}/changelog.Debian.gz DESTINATION share/doc/meshagent)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/examples/agent.toml ${CMAKE_CURRENT_LIST_DIR}/examples/loopback-topology.txt
        DESTINATION share/doc/meshagent/examples)

# The package.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_deb_arch arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_deb_arch amd64)
else()
  set(_deb_arch ${CMAKE_SYSTEM_PROCESSOR})
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME meshagent)
set(CPACK_PACKAGE_VENDOR "meshagent developers")
set(CPACK_PACKAGE_CONTACT "meshagent developers <meshagent@example.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${MESH_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${_deb_arch})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus-node-exporter")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "IoT mesh control-plane agent (OLSR, Medley, k-groups, Camera mutex)")
# CPack writes the summary as the synopsis and indents these lines by one space.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "meshagent runs on every smart node of a building's Wi-Fi or Ethernet mesh,
with no hub and no cloud: OLSR routing (RFC 3626), authenticated agent
messages, Medley membership, replicated k-groups and Camera mutual
exclusion. meshctl queries and controls the local agent over a Unix socket.
.
The package runs the agent as the meshagent system user under a hardened
systemd unit, with /etc/meshagent/agent.toml as its configuration; the
service starts once the mesh key is in /etc/meshagent/mesh.key.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_deb}/conffiles ${_deb}/postinst ${_deb}/prerm ${_deb}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
include(CPack)
