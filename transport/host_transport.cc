#include "transport/host_transport.h"

#include "core/comm.h"
#include "core/fault_point.h"
#include "core/liveness.h"
#include "core/log.h"
#include "transport/select.h"

namespace braid {
namespace {

constexpr uint32_t kOfferTag = 0x48000000;  // | channel: receiver -> sender
constexpr uint32_t kAckTag = 0x49000000;    // | channel: sender -> receiver

}  // namespace

HostTransport::~HostTransport() { close(true); }

const transport::HostLinkTransport& HostTransport::transportTo(int peer) const {
  return transport::hostTransportOf(comm_->peers[comm_->rank], comm_->peers[peer]);
}

ncclResult_t HostTransport::offerReceivers(const std::set<ConnKey>& recvs) {
  for (const ConnKey& key : recvs) {
    if (recvs_.count(key) || pendingRecvs_.count(key)) continue;
    const transport::HostLinkTransport& t = transportTo(key.second);
    transport::HostSegment seg;
    transport::HostOffer offer;
    const ncclResult_t rc = t.makeReceiver(comm_, key, &seg, &offer);
    if (seg.base) recvSegments_[key] = seg;  // released at close, also when making it failed
    BRAID_CHECK(rc);
    if (!t.offers()) {  // each end has its own FIFO
      recvs_[key].base = seg.base;
      continue;
    }
    pendingRecvs_.insert(key);
    faultPoint("host-offer-made");
    BRAID_CHECK(comm_->bootstrap->send(key.second, kOfferTag | key.first, &offer, sizeof(offer)));
    faultPoint("host-offer-sent");
  }
  return ncclSuccess;
}

ncclResult_t HostTransport::attachSenders(const std::set<ConnKey>& sends) {
  for (const ConnKey& key : sends) {
    if (sends_.count(key)) continue;
    const transport::HostLinkTransport& t = transportTo(key.second);
    transport::HostOffer offer;
    if (t.offers()) {
      BRAID_CHECK(comm_->bootstrap->recv(key.second, kOfferTag | key.first, &offer, sizeof(offer)));
      faultPoint("host-offer-received");
    }
    transport::HostSegment seg;
    const ncclResult_t rc = t.attachSender(comm_, key, offer, &seg);
    if (seg.base) sendSegments_[key] = seg;
    BRAID_CHECK(rc);
    sends_[key].base = seg.base;
    if (!t.offers()) continue;
    char ack = 1;
    BRAID_CHECK(comm_->bootstrap->send(key.second, kAckTag | key.first, &ack, 1));
  }
  return ncclSuccess;
}

ncclResult_t HostTransport::finishReceivers(const std::set<ConnKey>& recvs) {
  for (const ConnKey& key : recvs) {
    if (!pendingRecvs_.count(key)) continue;
    char ack = 0;
    transport::HostSegment& seg = recvSegments_[key];
    BRAID_CHECK(comm_->bootstrap->recv(key.second, kAckTag | key.first, &ack, 1));
    transportTo(key.second).acknowledged(&seg);
    recvs_[key].base = seg.base;
    pendingRecvs_.erase(key);
  }
  return ncclSuccess;
}

void HostTransport::abandonSetup(const std::set<ConnKey>& recvs, const std::set<ConnKey>& sends) {
  for (const ConnKey& key : recvs) {
    auto it = recvSegments_.find(key);
    if (it != recvSegments_.end()) transportTo(key.second).abandon(comm_, key, /*send=*/false, &it->second);
  }
  for (const ConnKey& key : sends)
    if (!sends_.count(key)) transportTo(key.second).abandon(comm_, key, /*send=*/true, nullptr);
}

HostConnection* HostTransport::sendConn(int channel, int peer) {
  auto it = sends_.find({channel, peer});
  return it == sends_.end() ? nullptr : &it->second;
}

HostConnection* HostTransport::recvConn(int channel, int peer) {
  auto it = recvs_.find({channel, peer});
  return it == recvs_.end() ? nullptr : &it->second;
}

void HostTransport::close(bool /*abort*/) {
  if (comm_->liveness)
    for (int r = 0; r < comm_->nRanks; ++r)
      if (comm_->liveness->state(r) == PeerState::Dead) transportTo(r).peerDied(comm_, r);
  for (auto& [key, seg] : sendSegments_) transportTo(key.second).release(comm_, key, /*send=*/true, &seg);
  for (auto& [key, seg] : recvSegments_) transportTo(key.second).release(comm_, key, /*send=*/false, &seg);
  sendSegments_.clear();
  recvSegments_.clear();
  sends_.clear();
  recvs_.clear();
  pendingRecvs_.clear();
}

}  // namespace braid
