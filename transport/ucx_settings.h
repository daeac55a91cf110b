// What braid sets in its UCX context, each only where the user set nothing: the network device
// (the bootstrap's), eager for every slot, no memtype cache, TCP segments of a slot. Measured
// reasons beside each in ucx_settings.cc.
#pragma once
#include <string>

#include "transport/ucx_api.h"

#if BRAID_HAVE_UCX
namespace braid::transport::ucx {

// UCX's configuration with braid's settings in it (release it with api.configRelease);
// *ifName gets the network device given to UCX (empty: UCX chooses).
ucs_status_t readConfig(const Api& api, ucp_config_t** config, std::string* ifName);

}  // namespace braid::transport::ucx
#endif
