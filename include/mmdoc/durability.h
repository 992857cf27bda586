// mmdoc::Durability: what a commit waits for before it returns.
//
// Set per database (Options::durability) and overridable per commit
// (WriteOptions::durability). storage::Pager::SyncForCommit is the only
// function that turns a mode into syscalls.
//
// mmdoc logs every commit to a write-ahead log beside the data file
// (<db>-log); the modes differ only in how the log reaches the disk:
//
//   mode      commit waits for              kill -9 loses   power loss loses
//   --------  ----------------------------  --------------  -------------------------
//   kNone     nothing (OS writes back)      nothing         recent commits; the file
//                                                           opens at an intact earlier
//                                                           commit
//   kPeriodic nothing; a background flush   nothing         at most the flush interval
//             syncs the log every T ms                      (Options::sync_interval_ms)
//   kMsync    msync(MS_SYNC) of the log     nothing         nothing acknowledged
//             bytes it wrote through the map
//   kFsync    fdatasync of the log file     nothing         nothing acknowledged
//   kGroup    a shared fdatasync that       nothing         nothing acknowledged
//             covers every commit queued
//             since the last one
//
// The values are stored in log records and options files: do not renumber.
#ifndef MMDOC_DURABILITY_H_
#define MMDOC_DURABILITY_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace mmdoc {

enum class Durability : uint8_t {
  kNone = 0,
  kPeriodic = 1,
  kMsync = 2,
  kFsync = 3,
  kGroup = 4,
};

// "none", "periodic", "msync", "fsync", "group".
inline const char* DurabilityName(Durability d) {
  switch (d) {
    case Durability::kNone:
      return "none";
    case Durability::kPeriodic:
      return "periodic";
    case Durability::kMsync:
      return "msync";
    case Durability::kFsync:
      return "fsync";
    case Durability::kGroup:
      return "group";
  }
  return "?";
}

// Whether d is one of the five modes (a value cast from a wider integer may
// not be); DB::Open and DB::Begin refuse any other with InvalidArgument.
inline bool IsDurability(Durability d) { return DurabilityName(d)[0] != '?'; }

// Parses a name printed by DurabilityName; nullopt for anything else.
inline std::optional<Durability> ParseDurability(std::string_view s) {
  if (s == "none") return Durability::kNone;
  if (s == "periodic") return Durability::kPeriodic;
  if (s == "msync") return Durability::kMsync;
  if (s == "fsync") return Durability::kFsync;
  if (s == "group") return Durability::kGroup;
  return std::nullopt;
}

}  // namespace mmdoc

#endif  // MMDOC_DURABILITY_H_
