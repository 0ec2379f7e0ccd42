// One round of gossip messages with the neighbours, every message in flight at once.
//
// Start posts a receive from each in-neighbour and a send to each out-neighbour and returns at
// once; Finish waits for all of them. A round may stay in flight between the two calls while the
// caller computes (the one-step overlap of D-PSGD and SGP). Receives of a known size are posted
// by Start into buffers of that size; receives of an unknown size (compressed payloads) are
// probed for when Finish waits, then received at their exact size.
//
// A message of a known size larger than kSegmentBytes travels as consecutive segments of
// kSegmentBytes (the last one shorter), each its own point-to-point message, all in flight at once.
// Every segment is under the MPI transport's TCP eager limit, so it goes out at once into the
// receive already posted for it. A whole model above the limit would go by rendezvous: the
// receiver's clear-to-send rides the connection behind its own model going the other way, and on
// a full-duplex link the two directions of a pair of neighbours end up taking turns (docs/
// performance.md, "Gossip rounds and the duplex link"). Messages of an unknown size are not
// segmented. Whether a round's messages are segmented thus follows from `recv_bytes`, which every
// rank of an algorithm passes alike: sends are segmented when this rank's receives have a known
// size.
//
// Bytes are counted where they are sent, by the transport. Not thread safe; Start and Finish run
// on the thread that owns the transport, and the payloads given to Start must stay valid and
// unchanged until Finish returns (or the exchange is destroyed).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frugal/transport.h"

namespace frugal::gossip {

class NeighbourExchange {
 public:
  static constexpr size_t kSegmentBytes = size_t{1} << 20;

  // `payloads[k]` goes to `to[k]`. `recv_bytes` > 0: every message from `from` has that size;
  // 0: sizes are learnt by probing in Finish. A previous round must have finished.
  void Start(Transport& t, int tag, std::span<const int> to,
             std::span<const std::span<const std::byte>> payloads, std::span<const int> from,
             size_t recv_bytes);
  // Same payload to every out-neighbour.
  void Start(Transport& t, int tag, std::span<const int> to, std::span<const std::byte> payload,
             std::span<const int> from, size_t recv_bytes);

  // Waits for every send and receive of the round. kTimeout naming the neighbours that did not
  // answer within `timeout` (`what` names the round), kMalformed when a message (or a segment)
  // of a known size arrived with another size, or the transport's error. A segmented message
  // shorter than expected by whole segments leaves segments missing: kTimeout.
  Status Finish(Transport& t, Duration timeout, const std::string& what);

  // Non-blocking: tests every send and posted receive of the round (which moves the messages
  // along: Open MPI progresses while it is called); true when all of them have completed or no
  // round is in flight. Receives of an unknown size are left to Finish.
  bool Progress();

  bool in_flight() const { return in_flight_; }
  // After Finish: the message from `from[k]`.
  std::span<const std::byte> Received(size_t k) const;
  std::span<const float> ReceivedFloats(size_t k) const;
  int Source(size_t k) const { return from_[k]; }
  size_t received_count() const { return from_.size(); }

 private:
  bool in_flight_ = false;
  int tag_ = 0;
  size_t recv_bytes_ = 0;
  std::vector<int> to_;
  std::vector<int> from_;
  // Every send of the round (segments included) and the index in to_ of its destination.
  std::vector<std::unique_ptr<Work>> sends_;
  std::vector<size_t> send_peer_;
  // recvs_[k]: the receives of the message from from_[k], one per segment (empty until probed
  // for a message of an unknown size).
  std::vector<std::vector<std::unique_ptr<Work>>> recvs_;
  // Float storage keeps the buffers aligned for float views; sizes_ are the bytes that arrived.
  std::vector<std::vector<float>> buffers_;
  std::vector<size_t> sizes_;
};

}  // namespace frugal::gossip
