// A transport that forwards every required call to another one: a wrapper (the fault injector, a
// test's counting transport) derives from it and overrides only the calls it watches or changes.
// The shared-memory sends and receives keep Transport's default (through the wrapper's ISend and
// IRecv) unless the wrapper overrides them; NewShared and the peer-memory calls are forwarded, so
// memory from NewShared is the inner transport's and its peers can map it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "frugal/transport.h"

namespace frugal {

class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string hostname() const override { return inner_.hostname(); }
  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    return inner_.ISend(dst, tag, data);
  }
  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    return inner_.IRecv(src, tag, data);
  }
  StatusOr<ProbeResult> Probe(int src, int tag, Duration timeout) override {
    return inner_.Probe(src, tag, timeout);
  }
  StatusOr<std::optional<ProbeResult>> IProbe(int src, int tag) override {
    return inner_.IProbe(src, tag);
  }
  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    return inner_.Split(color, key, timeout);
  }
  SharedBytes NewShared(size_t bytes) override { return inner_.NewShared(bytes); }
  bool SharesMemoryWithPeers() const override { return inner_.SharesMemoryWithPeers(); }
  bool CoreForEachRank() const override { return inner_.CoreForEachRank(); }
  std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const override {
    return inner_.RegionOf(bytes);
  }
  StatusOr<const std::byte*> MapPeerRegion(int peer, const PeerRegion& region) override {
    return inner_.MapPeerRegion(peer, region);
  }
  uint64_t bytes_sent() const override { return inner_.bytes_sent(); }
  uint64_t messages_sent() const override { return inner_.messages_sent(); }

 protected:
  Transport& inner_;
};

}  // namespace frugal
