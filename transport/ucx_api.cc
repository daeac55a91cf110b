#include "transport/ucx_api.h"

#include <dlfcn.h>

#include <mutex>

#include "core/env.h"

namespace braid::transport::ucx {

#if BRAID_HAVE_UCX
const Api* api(std::string* why) {
  static std::once_flag once;
  static Api table;
  static bool ok = false;
  static std::string error;
  std::call_once(once, [] {
    // BRAID_UCX_LIBRARY names another file (tests make UCX unavailable with a path that does not exist).
    const char* chosen = env::get("BRAID_UCX_LIBRARY");
    const std::string name = chosen ? chosen : "libucp.so.0";
    void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      error = std::string("UCX is not installed here (") + (e ? e : (name + " not found").c_str()) +
              (chosen ? "; BRAID_UCX_LIBRARY chose that file" : "") +
              "). Fix: install UCX 1.13 or newer (Debian/Ubuntu: apt install libucx0), or put its lib folder on "
              "LD_LIBRARY_PATH";
      return;
    }
    bool all = true;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (fn == nullptr) {
        error += std::string(error.empty() ? "" : ", ") + name;
        all = false;
      }
    };
    get(table.configRead, "ucp_config_read");
    get(table.configModify, "ucp_config_modify");
    get(table.configRelease, "ucp_config_release");
    get(table.initVersion, "ucp_init_version");
    get(table.cleanup, "ucp_cleanup");
    get(table.contextQuery, "ucp_context_query");
    get(table.versionString, "ucp_get_version_string");
    get(table.workerCreate, "ucp_worker_create");
    get(table.workerDestroy, "ucp_worker_destroy");
    get(table.workerGetAddress, "ucp_worker_get_address");
    get(table.workerReleaseAddress, "ucp_worker_release_address");
    get(table.workerProgress, "ucp_worker_progress");
    get(table.workerGetEfd, "ucp_worker_get_efd");
    get(table.workerArm, "ucp_worker_arm");
    get(table.epCreate, "ucp_ep_create");
    get(table.epCloseNbx, "ucp_ep_close_nbx");
    get(table.tagSendNbx, "ucp_tag_send_nbx");
    get(table.tagRecvNbx, "ucp_tag_recv_nbx");
    get(table.tagRecvRequestTest, "ucp_tag_recv_request_test");
    get(table.tagProbeNb, "ucp_tag_probe_nb");
    get(table.tagMsgRecvNbx, "ucp_tag_msg_recv_nbx");
    get(table.requestCheckStatus, "ucp_request_check_status");
    get(table.requestCancel, "ucp_request_cancel");
    get(table.requestFree, "ucp_request_free");
    get(table.memMap, "ucp_mem_map");
    get(table.memUnmap, "ucp_mem_unmap");
    get(table.statusString, "ucs_status_string");
    if (!all) {
      error = "libucp.so.0 lacks " + error + ". Fix: install UCX 1.13 or newer";
      ::dlclose(h);
      return;
    }
    ok = true;
  });
  if (!ok && why) *why = error;
  return ok ? &table : nullptr;
}
#else
const Api* api(std::string* why) {
  if (why) *why = "this braid was built without UCX (no ucp/api/ucp.h on the build machine). Fix: install libucx-dev and rebuild";
  return nullptr;
}
#endif

}  // namespace braid::transport::ucx
