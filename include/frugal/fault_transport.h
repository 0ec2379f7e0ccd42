// A Transport that injects one fault into what another transport sends, for fault tests of real
// jobs (`frugal train --inject drop|corrupt:...`; the in-process transport has its own rules,
// inproc_transport.h).
//
// The wrapper passes everything through to `inner` until its TransportFault is armed. From then
// on the first message this rank sends (through the wrapper or a transport Split from it) that the
// fault's `choose` accepts is hit, once:
//   kDrop     the message is not sent; its send completes at once, as if it had been;
//   kCorrupt  a copy of the message with bit `choose(data)` flipped is sent instead.
// Later messages pass through. Bytes are counted by `inner` as usual (a dropped message is not).
//
// Thread safety: as the inner transport; Arm() and fired() may be called from any thread (the
// training thread arms, the engine thread sends). `inner` must outlive the wrapper.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "frugal/transport.h"

namespace frugal {

class TransportFault {
 public:
  enum class Kind { kDrop, kCorrupt };
  // For a message about to be sent: the bit to flip (kCorrupt) or any value (kDrop) to hit it,
  // nothing to let it pass. Empty: every message qualifies (bit 0).
  using Chooser = std::function<std::optional<uint64_t>(std::span<const std::byte> data)>;

  TransportFault(Kind kind, Chooser choose) : kind_(kind), choose_(std::move(choose)) {}

  Kind kind() const { return kind_; }
  void Arm() { armed_.store(true); }
  // True once a message was hit.
  bool fired() const { return fired_.load(); }

  // For the wrapper: whether to hit the message, and which bit (claims the fault).
  std::optional<uint64_t> Take(std::span<const std::byte> data);

 private:
  Kind kind_;
  Chooser choose_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> fired_{false};
};

std::unique_ptr<Transport> WithTransportFault(Transport& inner,
                                              std::shared_ptr<TransportFault> fault);

}  // namespace frugal
