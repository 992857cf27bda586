// index::Run: one frozen generation's changes to one tree, written as a tree
// of its own in the same file (docs/write-path.md, "Sorted runs before the
// leaves").
//
// A merge of a generation straight into a large tree copies about one leaf
// per change. Written as a run instead, the changes arrive in key order and
// fill each leaf of a new tree before it splits, so each run leaf is written
// once, packed. Reads look in a tree's runs, newest first, between the write
// buffer and the tree; once a tree has enough runs they are merged into it
// together (MergeRunsInto), one leaf copy for the changes of several runs.
//
// A run's entry: the key as the tree stores it; the value a tag byte, then
// the value for a put (kRunPut) or nothing for an erase (kRunErase), which
// hides the key in every older run and in the tree.
//
// Thread safety: as BTree: one Txn and one thread.
#ifndef MMDOC_INDEX_RUN_H_
#define MMDOC_INDEX_RUN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "index/btree.h"
#include "index/key_filter.h"
#include "mmdoc/status.h"

namespace mmdoc::index {

inline constexpr char kRunPut = 'p';
inline constexpr char kRunErase = 'e';

// A run as a reader sees it: its tree at the reader's snapshot, its key
// filter (nullptr: none; every key may be in it) and the net change in
// live keys it makes to the layers below.
struct RunRef {
  BTree* tree = nullptr;
  const KeyFilter* filter = nullptr;
  int64_t count_delta = 0;
  // A run of a merge under way: the tree holds its changes below this key
  // (empty: none).
  std::string_view merged_below;
};

// The stored value of a change: *out = tag + value.
void EncodeRunValue(bool erased, std::string_view value, std::string* out);
// Splits a stored run value. Corruption when the tag is not one of the two.
Status DecodeRunValue(std::string_view stored, bool* erased, std::string_view* value);

// Where a merge of runs into their tree stopped (MergeRunsInto).
struct RunMerge {
  bool done = false;       // no change of the runs is left from `from` on
  std::string next;        // else: the first key not merged
  int64_t live_delta = 0;  // keys the tree gained (negative: lost)
};

// Writes each key's newest change among `runs` (newest first), from key
// `from` on (empty: the first key), into `tree`: puts as upserts, erases as
// deletes (of a key that may be absent). The runs are read, not changed.
// `between` is called after each change, when no page pointer is held (a
// merge writes its private pages back there); it sets *pause to stop the
// merge there, and its error stops the merge. A merge may be resumed at
// out->next, in a later txn, or done again from an earlier key: a change
// written twice leaves the tree as once, so a key range already merged
// reads the same through the runs as without them. Any error may leave
// the tree half merged: abort the transaction.
Status MergeRunsInto(BTree* tree, const std::vector<BTree*>& runs, std::string_view from,
                     const std::function<Status(bool* pause)>& between, RunMerge* out);

// Whether a lookup of `key` must read a run: its filter (nullptr: none) may
// hold the key (`hash`: KeyHash(key)), and its merge, if one is
// under way, has not passed the key (there the tree reads the same). A
// lookup through several runs hashes once and Prefetches every filter's
// block first, so that their cache misses overlap.
inline bool RunMayHold(const KeyFilter* filter, std::string_view merged_below, std::string_view key,
                       uint64_t hash) {
  return key >= merged_below && (filter == nullptr || filter->MayContainHash(hash));
}

// Looks `key` up in run `run`: *found when the run holds it, with *erased
// and *value (valid as BTree::Get's).
Status FindInRun(BTree* run, std::string_view key, bool* found, bool* erased,
                 std::string_view* value);

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_RUN_H_
