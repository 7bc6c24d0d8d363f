#include "exec/forwarding_comm.hpp"

#include <utility>

#include "core/error.hpp"

namespace octo::exec {

ForwardingComm::ForwardingComm(Comm& host) : host_(&host) { set_timeout(host.timeout()); }

ForwardingComm::ForwardingComm(std::unique_ptr<Comm> host)
    : owned_host_(std::move(host)), host_(owned_host_.get()) {
  if (!host_) fail("forwarding communicator: no host communicator");
  set_timeout(host_->timeout());
}

ForwardingComm::~ForwardingComm() = default;

Comm& ForwardingComm::host() {
  host_->set_timeout(timeout());
  return *host_;
}

std::unique_ptr<Comm> ForwardingComm::split_host(int color, int key) {
  std::unique_ptr<Comm> child = host().split(color, key);
  child->set_timeout(timeout());
  return child;
}

}  // namespace octo::exec
