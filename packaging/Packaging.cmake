# Packages: `cmake --build <build> --target package` writes ekco_<version>_<arch>.deb and
# ekco-<version>.<arch>.rpm into the build folder, from the same install() rules:
#   /opt/ekco/bin/ekco        the self-contained binary: its loader and libraries in /opt/ekco/lib
#   /opt/ekco/lib/            every shared library it loads (glibc and ld.so included), from the
#                             build machine's Debian packages (packaging/bundle-libs)
#   /usr/bin/ekco             -> ../../opt/ekco/bin/ekco
#   /usr/bin/ekco-purge-node  -> ekco (runs `ekco purge-node`)
#   /opt/ekco/startup.sh, /opt/ekco/shutdown.sh     (rendered by `ekco render units`)
#   /usr/lib/systemd/system/ekco-agent.service      (Type=notify, Restart=always, WatchdogSec)
#   /usr/lib/systemd/system/ekco-reboot.service     (rendered by `ekco render units`)
#   (/usr/lib, which every systemd searches; /lib/systemd/system is not one on SUSE)
#   /etc/ekco/config.yaml                           (conffile / %config(noreplace))
#   /usr/share/doc/ekco/copyright                   ekco's and every bundled library's notice
# The agent keeps its own copy of the units under /etc/systemd/system up to date at run time;
# the packaged ones are the same bytes, so a node has them before the agent first runs.
# Only in trees built without tests (CMakeLists.txt): scripts/package-check's build-pkg/.

# The binary the packages install runs on any Linux of its architecture with whatever libc and
# libraries the host has (or none: a chroot of the package alone): it is linked to be started by
# the loader in /opt/ekco/lib and to find its libraries there first, through an RPATH (not a
# RUNPATH, which would not apply to the libraries' own dependencies). Nothing sets
# LD_LIBRARY_PATH, so what ekco runs (host jobs, the installer, HAProxy checks) sees the host's
# own libraries. Only the loader's file name depends on the architecture.
set(EKCO_BUNDLE_DIR /opt/ekco/lib)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(EKCO_LOADER_NAME ld-linux-x86-64.so.2)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(EKCO_LOADER_NAME ld-linux-aarch64.so.1)
else()
  message(FATAL_ERROR "packaging: no dynamic loader name known for ${CMAKE_SYSTEM_PROCESSOR}")
endif()
add_executable(ekco-packaged ${PROJECT_SOURCE_DIR}/agent/main.cc)
target_link_libraries(ekco-packaged PRIVATE ekco_agent ekco_warnings)
target_link_options(ekco-packaged PRIVATE
  -Wl,--dynamic-linker=${EKCO_BUNDLE_DIR}/${EKCO_LOADER_NAME}
  -Wl,--disable-new-dtags -Wl,-rpath,${EKCO_BUNDLE_DIR})
set(EKCO_PACKAGED_STAGING ${CMAKE_BINARY_DIR}/packaged)
set_target_properties(ekco-packaged PROPERTIES
  OUTPUT_NAME ekco RUNTIME_OUTPUT_DIRECTORY ${EKCO_PACKAGED_STAGING}/bin SKIP_BUILD_RPATH ON)
add_custom_command(
  OUTPUT ${EKCO_PACKAGED_STAGING}/lib/${EKCO_LOADER_NAME} ${EKCO_PACKAGED_STAGING}/copyright
  COMMAND ${PROJECT_SOURCE_DIR}/packaging/bundle-libs $<TARGET_FILE:ekco-packaged>
          ${EKCO_LOADER_NAME} ${EKCO_PACKAGED_STAGING}/lib ${EKCO_PACKAGED_STAGING}/copyright
  DEPENDS ekco-packaged ${PROJECT_SOURCE_DIR}/packaging/bundle-libs
  COMMENT "Bundling the libraries the packaged ekco loads (/opt/ekco/lib)")
add_custom_target(ekco_bundled_libs ALL
  DEPENDS ${EKCO_PACKAGED_STAGING}/lib/${EKCO_LOADER_NAME})

# The files `ekco render units` writes for the default config, rendered by the binary just
# built, so package and agent can never disagree.
set(EKCO_UNITS_STAGING ${CMAKE_BINARY_DIR}/packaging-units)
add_custom_command(
  OUTPUT ${EKCO_UNITS_STAGING}/etc/systemd/system/ekco-reboot.service
         ${EKCO_UNITS_STAGING}/opt/ekco/startup.sh ${EKCO_UNITS_STAGING}/opt/ekco/shutdown.sh
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${EKCO_UNITS_STAGING}
  COMMAND $<TARGET_FILE:ekco> render units --config ${PROJECT_SOURCE_DIR}/packaging/config.yaml
          --out ${EKCO_UNITS_STAGING} --bin /usr/bin/ekco
  DEPENDS ekco ${PROJECT_SOURCE_DIR}/packaging/config.yaml
  COMMENT "Rendering the packaged systemd units")
add_custom_target(ekco_packaged_units ALL
  DEPENDS ${EKCO_UNITS_STAGING}/etc/systemd/system/ekco-reboot.service)

# Destinations are relative to a prefix of "/" (so `cmake --install` lays out the same tree as
# the packages): CPack RPM marks every file of an absolute destination as %config.
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX / CACHE PATH "Install prefix (the packages' layout is relative to /)" FORCE)
endif()
install(TARGETS ekco-packaged RUNTIME DESTINATION opt/ekco/bin)
install(DIRECTORY ${EKCO_PACKAGED_STAGING}/lib/ DESTINATION opt/ekco/lib USE_SOURCE_PERMISSIONS)
file(MAKE_DIRECTORY ${EKCO_PACKAGED_STAGING}/links)
file(CREATE_LINK ../../opt/ekco/bin/ekco ${EKCO_PACKAGED_STAGING}/links/ekco SYMBOLIC)
file(CREATE_LINK ekco ${EKCO_PACKAGED_STAGING}/links/ekco-purge-node SYMBOLIC)
install(FILES ${EKCO_PACKAGED_STAGING}/links/ekco ${EKCO_PACKAGED_STAGING}/links/ekco-purge-node
        DESTINATION usr/bin)
install(FILES ${EKCO_PACKAGED_STAGING}/copyright DESTINATION usr/share/doc/ekco)
install(PROGRAMS ${EKCO_UNITS_STAGING}/opt/ekco/startup.sh ${EKCO_UNITS_STAGING}/opt/ekco/shutdown.sh
        DESTINATION opt/ekco)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/ekco-agent.service
              ${EKCO_UNITS_STAGING}/etc/systemd/system/ekco-reboot.service
        DESTINATION usr/lib/systemd/system)
# 0600: it may hold storage_migration_auth_token and an installer URL with a password.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/config.yaml DESTINATION etc/ekco
        PERMISSIONS OWNER_READ OWNER_WRITE)

set(CPACK_PACKAGE_NAME ekco)
set(CPACK_PACKAGE_VENDOR "ekco")
set(CPACK_PACKAGE_CONTACT "ekco maintainers <ekco@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Node agent for kubeadm clusters: clears and purges dead nodes, internal API load balancer, reboots, upgrades")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /)
set(CPACK_GENERATOR "DEB;RPM")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_STRIP_FILES ON)

# Debian: no Depends (the binary brings its libraries; the maintainer scripts need only sh, and
# systemctl only where systemd runs), conffile, scripts.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/prerm ${PROJECT_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# RPM: no automatic requirements or provides: the bundled libraries are ekco's own (providing
# libc.so.6 or libcurl.so.4 to the RPM database would be a lie that breaks other packages'
# dependency resolution, and requiring the host's would defeat the bundling). The scriptlets'
# /bin/sh is the only requirement rpmbuild adds.
execute_process(COMMAND uname -m OUTPUT_VARIABLE EKCO_RPM_ARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
set(CPACK_RPM_FILE_NAME "ekco-${PROJECT_VERSION}.${EKCO_RPM_ARCH}.rpm")
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_PACKAGE_AUTOREQPROV "no")
# No /usr/lib/.build-id links: they would claim the bundled Debian libraries' build IDs
# system-wide (and belong to debuginfo packages, which there are none of).
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/ekco/config.yaml"
    "%license /usr/share/doc/ekco/copyright")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /opt /usr/lib/systemd /usr/lib/systemd/system)
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/preun.sh)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/postun.sh)

include(CPack)
