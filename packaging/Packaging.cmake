# Packages: `cmake --build <build> --target package` writes ekco_<version>_<arch>.deb and
# ekco-<version>.<arch>.rpm into the build folder, from the same install() rules:
#   /usr/bin/ekco, /usr/bin/ekco-purge-node (-> ekco; runs `ekco purge-node`)
#   /opt/ekco/startup.sh, /opt/ekco/shutdown.sh     (rendered by `ekco render units`)
#   /lib/systemd/system/ekco-agent.service          (Type=notify, Restart=always, WatchdogSec)
#   /lib/systemd/system/ekco-reboot.service         (rendered by `ekco render units`)
#   /etc/ekco/config.yaml                           (conffile / %config(noreplace))
# The agent keeps its own copy of the units under /etc/systemd/system up to date at run time;
# the packaged ones are the same bytes, so a node has them before the agent first runs.

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
install(TARGETS ekco RUNTIME DESTINATION usr/bin)
file(CREATE_LINK ekco ${CMAKE_BINARY_DIR}/ekco-purge-node SYMBOLIC)
install(FILES ${CMAKE_BINARY_DIR}/ekco-purge-node DESTINATION usr/bin)
install(PROGRAMS ${EKCO_UNITS_STAGING}/opt/ekco/startup.sh ${EKCO_UNITS_STAGING}/opt/ekco/shutdown.sh
        DESTINATION opt/ekco)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/ekco-agent.service
              ${EKCO_UNITS_STAGING}/etc/systemd/system/ekco-reboot.service
        DESTINATION lib/systemd/system)
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

# Debian: dependencies from the binary's shared libraries (dpkg-shlibdeps), conffile, scripts.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/prerm ${PROJECT_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# RPM: rpmbuild finds the library dependencies itself (AutoReq).
execute_process(COMMAND uname -m OUTPUT_VARIABLE EKCO_RPM_ARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
set(CPACK_RPM_FILE_NAME "ekco-${PROJECT_VERSION}.${EKCO_RPM_ARCH}.rpm")
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/ekco/config.yaml")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /opt /lib /lib/systemd /lib/systemd/system
    /usr/lib/.build-id)
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/preun.sh)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${PROJECT_SOURCE_DIR}/packaging/rpm/postun.sh)

include(CPack)
