// Scans of compound, descending, sparse and partial indexes (index_plan.h).
#include "engine/index_plan.h"

#include <algorithm>

#include "engine/partial_filter.h"

namespace mmdoc {

namespace {

using Intervals = std::vector<engine::KeyInterval>;

// Past this many key prefixes an $in stops adding fields to the bounds.
constexpr size_t kMaxIntervals = 4096;

bool IsPoint(const engine::KeyInterval& i) {
  return i.lo_inclusive && i.hi_inclusive && !i.lo.empty() && i.lo == i.hi;
}

std::string Inverted(std::string s) {
  for (char& c : s) c = static_cast<char>(~c);
  return s;
}

// A field's value intervals as key intervals of the index: a descending
// field's bytes are complemented, which swaps the ends and the order.
Intervals ToKeySpace(const Intervals& v, int direction) {
  if (direction > 0) return v;
  Intervals out;
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    engine::KeyInterval i;
    i.lo = Inverted(it->hi);
    i.lo_inclusive = it->hi_inclusive;
    i.hi = Inverted(it->lo);
    i.hi_inclusive = it->lo_inclusive;
    out.push_back(std::move(i));
  }
  return out;
}

// Whether some interval holds the null key (the key of a missing field).
bool HoldsNull(const Intervals& v) {
  std::string null_key;
  engine::AppendNullKey(&null_key);
  for (const engine::KeyInterval& i : v) {
    const bool lo_ok = i.lo.empty() || i.lo < null_key || (i.lo == null_key && i.lo_inclusive);
    const bool hi_ok = i.hi.empty() || i.hi > null_key || (i.hi == null_key && i.hi_inclusive);
    if (lo_ok && hi_ok) return true;
  }
  return false;
}

std::string DescribeInterval(const engine::KeyInterval& i) {
  std::string s = i.lo_inclusive && !i.lo.empty() ? "[" : "(";
  s += i.lo.empty() ? "MinKey" : engine::DescribeKey(i.lo);
  s += ", ";
  s += i.hi.empty() ? "MaxKey" : engine::DescribeKey(i.hi);
  s += i.hi_inclusive && !i.hi.empty() ? "]" : ")";
  return Value::String(s).ToJson();
}

std::string DescribeField(const std::string& field, const Intervals* v) {
  std::string s = Value::String(field).ToJson() + ": [";
  if (v == nullptr) return s + Value::String("[MinKey, MaxKey]").ToJson() + "]";
  for (size_t i = 0; i < v->size(); i++) {
    if (i > 0) s += ", ";
    s += DescribeInterval((*v)[i]);
  }
  return s + "]";
}

}  // namespace

std::string DescribeBounds(const std::vector<IndexKey>& keys,
                           const std::vector<std::optional<Intervals>>& field_bounds) {
  std::string s = "{";
  for (size_t f = 0; f < keys.size(); f++) {
    if (f > 0) s += ", ";
    const bool bounded = f < field_bounds.size() && field_bounds[f];
    s += DescribeField(keys[f].field, bounded ? &*field_bounds[f] : nullptr);
  }
  return s + "}";
}

bool IndexHoldsAllMatches(const IndexMeta& m, const engine::Filter& filter) {
  return !m.sparse && (m.partial.empty() || engine::FilterImplies(filter.source(), m.partial));
}

std::optional<IndexScanPlan> PlanIndexScan(const IndexMeta& m, const engine::Filter& filter) {
  if (!m.partial.empty() && !engine::FilterImplies(filter.source(), m.partial)) return std::nullopt;
  std::vector<std::optional<Intervals>> bounds;
  bool excludes_missing = false;
  for (const IndexKey& k : m.keys) {
    bounds.push_back(filter.IndexBounds(k.field, m.multikey));
    if (bounds.back() && !HoldsNull(*bounds.back())) excludes_missing = true;
  }
  if (!bounds[0]) return std::nullopt;
  // A document with none of a sparse index's fields is not in it; the
  // filter rules it out only when some field's bounds leave out null.
  if (m.sparse && !excludes_missing) return std::nullopt;

  IndexScanPlan plan;
  plan.points = true;
  std::vector<std::string> prefixes(1);
  bool ranged = false;
  size_t i = 0;
  for (; i < m.keys.size() && bounds[i]; i++) {
    const Intervals keyed = ToKeySpace(*bounds[i], m.keys[i].direction);
    const bool points = std::all_of(keyed.begin(), keyed.end(), IsPoint);
    if (points && prefixes.size() * keyed.size() <= kMaxIntervals) {
      std::vector<std::string> next;
      for (const std::string& p : prefixes)
        for (const engine::KeyInterval& iv : keyed) next.push_back(p + iv.lo);
      prefixes.swap(next);
      if (keyed.size() == 1 && plan.pinned == i) plan.pinned++;
      continue;
    }
    // A range ends the bounds: each prefix with each interval.
    plan.points = false;
    for (const std::string& p : prefixes) {
      for (const engine::KeyInterval& iv : keyed) {
        engine::KeyInterval k;
        k.lo = p + iv.lo;
        k.lo_inclusive = iv.lo.empty() || iv.lo_inclusive;
        k.hi = p + iv.hi;
        k.hi_inclusive = iv.hi.empty() || iv.hi_inclusive;
        plan.intervals.push_back(std::move(k));
      }
    }
    ranged = true;
    i++;
    break;
  }
  plan.bounded = i;
  if (!ranged) {
    for (std::string& p : prefixes) {
      engine::KeyInterval k;
      k.lo = p;
      k.hi = std::move(p);
      plan.intervals.push_back(std::move(k));
    }
  }
  // An interval with both ends open at the start and end of the index.
  for (engine::KeyInterval& k : plan.intervals) {
    if (k.lo.empty()) k.lo_inclusive = true;
    if (k.hi.empty()) k.hi_inclusive = true;
  }
  bounds.resize(plan.bounded);
  plan.field_bounds = std::move(bounds);
  return plan;
}

bool IndexGivesSort(const IndexMeta& m, size_t pinned, const std::vector<SortSpec>& sort,
                    int* direction) {
  if (m.multikey) return false;
  size_t next = pinned;
  int dir = 0;
  for (const SortSpec& s : sort) {
    bool on_pinned = false;
    for (size_t j = 0; j < pinned; j++) on_pinned = on_pinned || m.keys[j].field == s.field;
    if (on_pinned) continue;  // one value: any order is its order
    if (next >= m.keys.size() || m.keys[next].field != s.field) return false;
    const int d = s.direction * m.keys[next].direction;
    if (dir != 0 && d != dir) return false;
    dir = d;
    next++;
  }
  *direction = dir == 0 ? 1 : dir;
  return true;
}

}  // namespace mmdoc
