// UCX's UCP functions that braid calls, opened at run time (dlopen of libucp.so.0), so that
// libbraid.so loads and runs on machines without UCX; only a communicator that needs another
// host fails, with a message saying what to install. Compiled against UCX's headers
// (libucx-dev): BRAID_HAVE_UCX is 0 when the build machine had none.
#pragma once
#include <string>

#if BRAID_HAVE_UCX
#include <ucp/api/ucp.h>

namespace braid::transport::ucx {

struct Api {
  decltype(&::ucp_config_read) configRead;
  decltype(&::ucp_config_modify) configModify;
  decltype(&::ucp_config_release) configRelease;
  decltype(&::ucp_init_version) initVersion;
  decltype(&::ucp_cleanup) cleanup;
  decltype(&::ucp_context_query) contextQuery;
  decltype(&::ucp_get_version_string) versionString;
  decltype(&::ucp_worker_create) workerCreate;
  decltype(&::ucp_worker_destroy) workerDestroy;
  decltype(&::ucp_worker_get_address) workerGetAddress;
  decltype(&::ucp_worker_release_address) workerReleaseAddress;
  decltype(&::ucp_worker_progress) workerProgress;
  decltype(&::ucp_worker_get_efd) workerGetEfd;
  decltype(&::ucp_worker_arm) workerArm;
  decltype(&::ucp_ep_create) epCreate;
  decltype(&::ucp_ep_close_nbx) epCloseNbx;
  decltype(&::ucp_tag_send_nbx) tagSendNbx;
  decltype(&::ucp_tag_recv_nbx) tagRecvNbx;
  decltype(&::ucp_tag_recv_request_test) tagRecvRequestTest;
  decltype(&::ucp_tag_probe_nb) tagProbeNb;
  decltype(&::ucp_tag_msg_recv_nbx) tagMsgRecvNbx;
  decltype(&::ucp_request_check_status) requestCheckStatus;
  decltype(&::ucp_request_cancel) requestCancel;
  decltype(&::ucp_request_free) requestFree;
  decltype(&::ucp_mem_map) memMap;
  decltype(&::ucp_mem_unmap) memUnmap;
  decltype(&::ucs_status_string) statusString;
};

}  // namespace braid::transport::ucx
#endif

namespace braid::transport::ucx {
struct Api;
// The process's UCX, loaded once; nullptr with *why (what was tried, what to install).
const Api* api(std::string* why);
}  // namespace braid::transport::ucx
