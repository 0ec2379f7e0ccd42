// Memory the MPI transport's ranks on one machine share: the blocks of this process that peers can
// map (MappableBlocks, behind Transport::NewShared and RegionOf) and the peers' blocks this process
// has mapped (PeerMaps, behind SharesMemoryWithPeers and MapPeerRegion). Internal to
// src/transport/mpi.
//
// A mappable block is a memfd of its own (memfd_create, mapped MAP_SHARED here). A peer maps it
// read-only by opening /proc/<pid>/fd/<fd> of the owner, which Linux allows to a process that may
// trace the owner (same user and no Yama restriction, or root). `generation` numbers the blocks
// this process made, so that a peer never takes a new block for an old one whose file descriptor
// number was reused: a mapping is kept per (peer, fd) and replaced when the generation differs.
// A peer's mapping keeps the pages alive after the owner frees the block, so a late reader never
// faults.
//
// Whether the ranks of a communicator can map each other's memory is decided collectively when a
// transport is made (PeerMaps::Exchange): every rank gathers every rank's kernel boot id, network
// namespace and process id, maps the other ranks' probe block (a one-page memfd each process makes
// once, holding a random value) and checks the value; all ranks agree on the outcome
// (MPI_Allreduce). Ranks of emulated hosts (`--emulate`, one network namespace each) never share
// memory this way, so an algorithm that reads its peers' memory cannot bypass the emulated links.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::mpi_internal {

// A hash of this kernel's boot id (never 0), or 0 when it cannot be read: ranks with the same one
// run on one machine, emulated hosts included.
uint64_t BootIdHash();

// A block of memory backed by a memfd, or plain memory when memfd_create failed (fd -1).
struct MappableBlock {
  std::byte* data = nullptr;
  size_t capacity = 0;
  int fd = -1;
  uint64_t generation = 0;
};

// The mappable blocks this process has made and not freed. Thread safe.
class MappableBlocks {
 public:
  ~MappableBlocks();
  // A block of `capacity` bytes (a multiple of the page size).
  MappableBlock Allocate(size_t capacity);
  // Frees a block Allocate returned.
  void Free(std::byte* data);
  // The region of `bytes` if it lies inside one live mappable block.
  std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const;

 private:
  mutable std::mutex mu_;
  std::map<const std::byte*, MappableBlock> blocks_;  // by start address
};

// The other ranks of a communicator as holders of memory this process can map.
class PeerMaps {
 public:
  PeerMaps() = default;
  ~PeerMaps();
  PeerMaps(const PeerMaps&) = delete;
  PeerMaps& operator=(const PeerMaps&) = delete;

  // Collective over `comm` (see above). Without MPI errors every rank gets the same answer.
  static std::unique_ptr<PeerMaps> Exchange(MPI_Comm comm);

  // Every rank of the communicator can map the memory of every other.
  bool all_mapped() const { return all_mapped_; }
  // Maps `region` of `peer` (named `peer_name` in errors) read-only; see Transport::MapPeerRegion.
  StatusOr<const std::byte*> Map(int peer, const PeerRegion& region, const std::string& peer_name);

 private:
  struct Mapping {
    uint64_t generation = 0;
    const std::byte* data = nullptr;
    size_t length = 0;
  };
  std::vector<int64_t> pids_;
  bool all_mapped_ = false;
  std::map<std::pair<int, uint64_t>, Mapping> mappings_;  // by (peer, segment)
};

}  // namespace frugal::mpi_internal
