// CursorImpl: plans and runs one query.
//
// Plans, in order of preference:
//   IDHACK   the filter pins _id to points: look them up in the _id tree;
//   IXSCAN   an index on a field the filter constrains (equality, range or
//            $in): walk the index intervals, fetch each document by pk;
//            unique indexes and point intervals are preferred;
//   COLLSCAN walk the _id tree and test every document in place.
// Every candidate is re-checked with the full filter, so an index only has
// to return a superset; except when the bounds are exact for the whole
// filter (ExactBounds: the (g, n) query on a {g: 1, n: 1} index), where
// the check would only repeat the walk's key comparisons. Without a sort,
// documents stream. A one-key sort that an index gives (PlanIndexSort:
// _id, or a non-multikey index on a top-level field, when the plan is a
// COLLSCAN or already on that index) streams too, the index walked in the
// sort's direction. Any other sort collects the matches and sorts them by
// engine::SortKey (MongoDB's order and array rule: an array sorts by its
// smallest element ascending, its largest descending; missing = null; []
// below null), keeping only skip + limit of them with a limit, and
// refusing past max_sort_bytes.

#include <algorithm>
#include <cstring>

#include "engine/db_impl.h"
#include "engine/index_plan.h"
#include "engine/regex.h"

namespace mmdoc {

namespace {

// A sort field is a dotted path of field names, as MongoDB takes: no empty
// part ("a..b"), none starting with '$', no NUL.
Status CheckSortField(std::string_view field) {
  if (field.empty()) return Status::OK();
  size_t start = 0;
  for (;;) {
    const size_t dot = field.find('.', start);
    const std::string_view part =
        field.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || part[0] == '$' || part.find('\0') != std::string_view::npos)
      return Status::InvalidArgument("bad sort field", field);
    if (dot == std::string_view::npos) return Status::OK();
    start = dot + 1;
  }
}

bool IsPoint(const engine::KeyInterval& i) {
  return i.lo_inclusive && i.hi_inclusive && !i.lo.empty() && i.lo == i.hi;
}

// Score of an index plan: lower is better.
int PlanScore(const std::vector<engine::KeyInterval>& iv, bool unique) {
  bool points = std::all_of(iv.begin(), iv.end(), IsPoint);
  if (points && unique) return 0;
  if (points) return 1;
  return 2;
}

// Whether every document the bounds of index m's first `bounded` fields
// lead to matches the filter (Filter::BoundsAreExact), so the walk need
// not check them again. Not on a multikey index (a document's other keys
// decide matches the walk does not see) nor with a descending field (kept
// to the layout the randomized tests cover). A sparse or partial index is
// fine: planning it already required that it holds every match.
bool ExactBounds(const IndexMeta& m, size_t bounded, const engine::Filter& filter) {
  if (m.multikey) return false;
  std::vector<std::string_view> paths;
  if (m.simple()) {
    paths.push_back(m.field);
  } else {
    for (size_t i = 0; i < bounded && i < m.keys.size(); i++) {
      if (m.keys[i].direction < 0) return false;
      paths.push_back(m.keys[i].field);
    }
  }
  return filter.BoundsAreExact(paths);
}

Status CheckCounts(const FindOptions& options) {
  if (options.limit < 0) return Status::InvalidArgument("limit must be >= 0");
  if (options.skip < 0) return Status::InvalidArgument("skip must be >= 0");
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<CursorImpl>> CursorImpl::Create(TransactionImpl* t, CollState* c,
                                                       engine::Filter filter,
                                                       const FindOptions& options) {
  MMDOC_RETURN_IF_ERROR(CheckCounts(options));
  (void)engine::TakeRegexMatchError();  // none left over from elsewhere
  std::unique_ptr<CursorImpl> cur(new CursorImpl());
  cur->t_ = t;
  cur->c_ = c;
  cur->options_ = options;
  if (!options.projection.empty()) {
    auto p = engine::Projection::Parse(options.projection);
    if (!p.ok()) return p.status();
    cur->projection_ = std::move(p.value());
  }
  if (!options.sort.empty() && !options.sort_field.empty())
    return Status::InvalidArgument("give sort or sort_field, not both");
  cur->sort_ = options.sort;
  if (!options.sort_field.empty())
    cur->sort_.push_back(SortSpec{options.sort_field, options.sort_direction});
  if (cur->sort_.empty() && options.sort_direction != 1 && options.sort_direction != -1)
    return Status::InvalidArgument("sort direction must be 1 or -1");
  for (size_t i = 0; i < cur->sort_.size(); i++) {
    const SortSpec& k = cur->sort_[i];
    if (k.direction != 1 && k.direction != -1)
      return Status::InvalidArgument("sort direction must be 1 or -1", k.field);
    if (k.field.empty()) return Status::InvalidArgument("empty sort field");
    MMDOC_RETURN_IF_ERROR(CheckSortField(k.field));
    for (size_t j = 0; j < i; j++) {
      if (cur->sort_[j].field == k.field)
        return Status::InvalidArgument("sort field given twice", k.field);
    }
  }
  cur->filter_ = std::move(filter);
  if (!c->exists) {
    cur->mode_ = Mode::kEmpty;
    cur->explain_.plan = "EOF";
    return cur;
  }
  // Choose a plan.
  auto id_bounds = cur->filter_.IndexBounds("_id", /*multikey=*/false);
  int best = 3;
  if (id_bounds && std::all_of(id_bounds->begin(), id_bounds->end(), IsPoint)) {
    cur->mode_ = Mode::kIndex;
    cur->index_tree_ = c->primary.get();
    cur->index_is_primary_ = true;
    cur->index_unique_ = true;
    cur->intervals_ = std::move(*id_bounds);
    cur->explain_.plan = "IDHACK";
    cur->explain_.index = "_id";
    best = 0;
  } else {
    // Best first: a unique index pinned on all its fields; then the most
    // fields bounded; then one that gives the sort's order; then points
    // before ranges (PlanScore).
    size_t best_bounded = 0;
    bool best_sorts = false;
    for (size_t i = 0; i < c->meta.indexes.size(); i++) {
      const IndexMeta& m = c->meta.indexes[i];
      std::optional<IndexScanPlan> plan;
      int score;
      if (m.simple()) {
        auto b = cur->filter_.IndexBounds(m.field, m.multikey);
        if (!b) continue;
        score = PlanScore(*b, m.unique);
        plan.emplace();
        plan->bounded = 1;
        plan->intervals = std::move(*b);
      } else {
        plan = PlanIndexScan(m, cur->filter_);
        if (!plan) continue;
        score = plan->points && plan->bounded == m.keys.size() && m.unique ? 0
                : plan->points                                             ? 1
                                                                           : 2;
      }
      // As PlanIndexSort and PlanSpecSort will judge it.
      int dir;
      const bool sorts = !cur->sort_.empty() &&
                         (m.simple() ? cur->sort_.size() == 1 && cur->sort_[0].field == m.field &&
                                           !m.multikey && m.field.find('.') == std::string::npos
                                     : IndexGivesSort(m, plan->pinned, cur->sort_, &dir));
      bool better;
      if (best == 3 || (score == 0) != (best == 0)) {
        better = score < best;
      } else if (plan->bounded != best_bounded) {
        better = plan->bounded > best_bounded;
      } else if (sorts != best_sorts) {
        better = sorts;
      } else {
        better = score < best;
      }
      if (!better) continue;
      best = score;
      best_bounded = plan->bounded;
      best_sorts = sorts;
      cur->mode_ = Mode::kIndex;
      cur->index_tree_ = c->index_trees[i].get();
      cur->index_unique_ = m.unique;
      cur->index_is_primary_ = false;
      cur->dedup_ = m.multikey;
      cur->spec_index_ = m.simple() ? -1 : static_cast<int>(i);
      cur->spec_pinned_ = plan->pinned;
      cur->exact_ = ExactBounds(m, plan->bounded, cur->filter_);
      cur->intervals_ = std::move(plan->intervals);
      cur->explain_.plan = "IXSCAN";
      cur->explain_.index = m.field;
      // A simple index's bounds are intervals_ (explain()).
      cur->explain_keys_.clear();
      if (!m.simple()) {
        cur->explain_keys_ = m.keys;
        cur->explain_bounds_ = std::move(plan->field_bounds);
      }
    }
    if (best == 3 && id_bounds) {
      cur->exact_ = false;
      cur->mode_ = Mode::kIndex;
      cur->index_tree_ = c->primary.get();
      cur->index_is_primary_ = true;
      cur->index_unique_ = true;
      cur->intervals_ = std::move(*id_bounds);
      cur->explain_.plan = "IXSCAN";
      cur->explain_.index = "_id";
      cur->explain_keys_.clear();
      best = 2;
    }
  }
  if (best == 3) {
    cur->mode_ = Mode::kScan;
    cur->explain_.plan = "COLLSCAN";
  }
  // A document can show up under several keys of a multikey index (in one
  // interval or several); otherwise it has one key and intervals do not
  // overlap.
  const bool in_order = cur->sort_.empty() || cur->PlanIndexSort() || cur->PlanSpecSort();
  if (cur->mode_ != Mode::kIndex || cur->index_is_primary_) cur->dedup_ = false;
  if (cur->mode_ != Mode::kIndex || cur->index_is_primary_) cur->exact_ = false;
  cur->explain_.exact_bounds = cur->exact_;
  cur->OpenTreeCursor();
  if (!in_order) {
    cur->explain_.sorted_in_memory = true;
    Status s = cur->Materialize();
    if (!s.ok()) return s;
  }
  cur->Track();
  return cur;
}

void CursorImpl::OpenTreeCursor() {
  cursor_.emplace(mode_ == Mode::kIndex ? index_tree_ : c_->primary.get());
  if (mode_ == Mode::kScan && filter_.HasNeedle()) {
    // The buffer's documents without the needle are passed over in bulk, as
    // leaves without it are (NextFromScan). A scan with a limit may stop
    // early, so its tables are walked for a while before they select; one
    // without reads them whole at once (its own walk would cost more).
    cursor_->RejectInBuffer(
        [this](std::string_view d) {
          return filter_.MayMatchIn(reinterpret_cast<const uint8_t*>(d.data()), d.size());
        },
        &explain_.docs_examined,
        options_.limit > 0 ? index::BufferedTree::Cursor::kSelectAfter : 0);
  }
}

void CursorImpl::Track() {
  // A read transaction's state never changes under its cursors.
  if (t_ == nullptr || t_->read_only() || mode_ == Mode::kEmpty) return;
  tracked_ = true;
  coll_name_ = c_->name;
  if ((mode_ == Mode::kIndex || mode_ == Mode::kPoint) && !index_is_primary_)
    index_name_ = explain_.index;
  writes_seen_ = t_->writes();
  states_seen_ = t_->states();
}

Status CursorImpl::Revalidate() {
  bool reopened = false;
  if (t_->states() != states_seen_) {
    auto dropped = [&] {
      return Status::InvalidArgument(
          "the collection or index this cursor reads was dropped in its transaction",
          index_name_.empty() ? coll_name_ : coll_name_ + "." + index_name_);
    };
    if (t_->DroppedSince(CollectionTreeName(coll_name_), states_seen_) ||
        (!index_name_.empty() &&
         t_->DroppedSince(IndexTreeName(coll_name_, index_name_), states_seen_)))
      return dropped();
    states_seen_ = t_->states();
    // A materialized cursor holds copies and reads no tree.
    if (mode_ == Mode::kMaterialized) return Status::OK();
    // The states may be new objects (ToPages): look them up by name.
    cursor_.reset();
    CollState* c;
    MMDOC_RETURN_IF_ERROR(t_->Collection(coll_name_, false, &c));
    if (!c->exists) return dropped();
    c_ = c;
    if (index_is_primary_) {
      index_tree_ = c->primary.get();
    } else if (!index_name_.empty()) {
      size_t i = 0;
      while (i < c->meta.indexes.size() && c->meta.indexes[i].field != index_name_) i++;
      if (i == c->meta.indexes.size()) return dropped();
      index_tree_ = c->index_trees[i].get();
    }
    if (mode_ != Mode::kPoint) OpenTreeCursor();
    reopened = true;
  }
  if (t_->writes() != writes_seen_ || reopened) {
    writes_seen_ = t_->writes();
    if (positioned_ && cursor_) return Reposition();
  }
  return Status::OK();
}

Status CursorImpl::Reposition() {
  checked_leaf_ = nullptr;
  MMDOC_RETURN_IF_ERROR(cursor_->Seek(last_key_));
  const bool on_it = cursor_->Valid() && cursor_->key() == last_key_;
  // Gone: the entry Seek found (forward), or the one before it
  // (backward), is the next one, and the next step stays there.
  stay_ = !on_it;
  if (on_it || walk_dir_ > 0) return Status::OK();
  return cursor_->Valid() ? cursor_->Prev() : cursor_->SeekToLast();
}

bool CursorImpl::PlanIndexSort() {
  // One key: an index is on one field. (A first key on _id would do for
  // any number, but a second key after a unique one is rare.)
  if (sort_.size() != 1) return false;
  const std::string& field = sort_[0].field;
  // A dotted path reaches values through arrays in ways the index keys and
  // the sort's walk need not agree on; a top-level field they agree on but
  // for [] (the null key split below).
  if (field.find('.') != std::string::npos) return false;
  index::BufferedTree* tree = nullptr;
  bool unique = true;
  const bool primary = field == "_id";
  if (primary) {
    tree = c_->primary.get();
  } else {
    for (size_t i = 0; i < c_->meta.indexes.size(); i++) {
      const IndexMeta& m = c_->meta.indexes[i];
      // A multikey index holds a document under several keys; the sort
      // takes one of them (the smallest or largest), which the walk cannot.
      if (m.field != field || m.multikey || !m.simple()) continue;
      tree = c_->index_trees[i].get();
      unique = m.unique;
    }
  }
  if (tree == nullptr) return false;
  if (mode_ == Mode::kScan) {
    // No index constrains the filter: walk the sort's, every key.
    mode_ = Mode::kIndex;
    index_tree_ = tree;
    index_unique_ = unique;
    index_is_primary_ = primary;
    intervals_.assign(1, engine::KeyInterval());
    explain_.plan = "IXSCAN";
    explain_.index = field;
  } else if (mode_ != Mode::kIndex || index_tree_ != tree) {
    // EOF needs no sort; another index's bounds are kept (a sort of what
    // they find is cheaper than walking every key of this one).
    return mode_ == Mode::kEmpty;
  }
  // The bounds are sorted and disjoint (Filter::IndexBounds normalizes
  // them); refuse anything else rather than return a wrong order.
  for (size_t i = 1; i < intervals_.size(); i++) {
    const engine::KeyInterval& a = intervals_[i - 1];
    const engine::KeyInterval& b = intervals_[i];
    if (a.hi.empty() || b.lo.empty()) return false;
    int c = b.lo.compare(a.hi);
    if (c < 0 || (c == 0 && a.hi_inclusive && b.lo_inclusive)) return false;
  }
  // explain() describes these bounds, not the walk's split and order.
  explain_keys_ = {IndexKey{field, 1}};
  explain_bounds_ = {intervals_};
  if (!primary) {
    // [] is indexed as null but sorts below it (as undefined): walk the
    // null key twice, the [] documents first (ascending), then the rest.
    std::string null_key;
    engine::AppendNullKey(&null_key);
    std::vector<engine::KeyInterval> split;
    for (engine::KeyInterval& iv : intervals_) {
      const bool lo_below = iv.lo.empty() || iv.lo < null_key;
      const bool hi_above = iv.hi.empty() || iv.hi > null_key;
      const bool has_null = (lo_below || (iv.lo == null_key && iv.lo_inclusive)) &&
                            (hi_above || (iv.hi == null_key && iv.hi_inclusive));
      if (!has_null) {
        split.push_back(std::move(iv));
        null_pass_.push_back(kNullPassAll);
        continue;
      }
      if (lo_below) {
        engine::KeyInterval below = iv;
        below.hi = null_key;
        below.hi_inclusive = false;
        split.push_back(std::move(below));
        null_pass_.push_back(kNullPassAll);
      }
      engine::KeyInterval point;
      point.lo = point.hi = null_key;
      split.push_back(point);
      null_pass_.push_back(kNullPassEmptyArrays);
      split.push_back(std::move(point));
      null_pass_.push_back(kNullPassOthers);
      if (hi_above) {
        iv.lo = null_key;
        iv.lo_inclusive = false;
        split.push_back(std::move(iv));
        null_pass_.push_back(kNullPassAll);
      }
    }
    intervals_ = std::move(split);
    sort_path_ = field;
  }
  if (sort_[0].direction < 0) {
    walk_dir_ = -1;
    std::reverse(intervals_.begin(), intervals_.end());
    std::reverse(null_pass_.begin(), null_pass_.end());
  }
  return true;
}

bool CursorImpl::PlanSpecSort() {
  if (mode_ == Mode::kEmpty) return true;
  int dir = 1;
  if (mode_ == Mode::kIndex) {
    if (spec_index_ < 0 ||
        !IndexGivesSort(c_->meta.indexes[spec_index_], spec_pinned_, sort_, &dir))
      return false;
  } else if (mode_ == Mode::kScan) {
    // No index bounds the filter: walk an index whose key pattern gives
    // the sort and that holds every document the filter can match.
    size_t i = 0;
    for (; i < c_->meta.indexes.size(); i++) {
      const IndexMeta& m = c_->meta.indexes[i];
      if (!m.simple() && IndexHoldsAllMatches(m, filter_) && IndexGivesSort(m, 0, sort_, &dir))
        break;
    }
    if (i == c_->meta.indexes.size()) return false;
    const IndexMeta& m = c_->meta.indexes[i];
    mode_ = Mode::kIndex;
    index_tree_ = c_->index_trees[i].get();
    index_unique_ = m.unique;
    index_is_primary_ = false;
    dedup_ = false;  // not multikey
    spec_index_ = static_cast<int>(i);
    intervals_.assign(1, engine::KeyInterval());
    explain_.plan = "IXSCAN";
    explain_.index = m.field;
    explain_keys_ = m.keys;
    explain_bounds_.clear();
  } else {
    return false;
  }
  // The intervals are sorted and disjoint (PlanIndexScan).
  if (dir < 0) {
    walk_dir_ = -1;
    std::reverse(intervals_.begin(), intervals_.end());
  }
  return true;
}

const ExplainInfo& CursorImpl::explain() const {
  if (!explain_.bounds.empty() || explain_.index.empty()) return explain_;
  if (!explain_keys_.empty()) {
    explain_.bounds = DescribeBounds(explain_keys_, explain_bounds_);
  } else {
    // A simple index or _id, its bounds as planned: intervals_, or the
    // point plan's key.
    std::vector<std::optional<std::vector<engine::KeyInterval>>> b(1);
    if (mode_ == Mode::kPoint) {
      b[0].emplace(1);
      (*b[0])[0].lo = (*b[0])[0].hi = point_key_;
    } else {
      b[0] = intervals_;
    }
    explain_.bounds = DescribeBounds({IndexKey{explain_.index, 1}}, b);
  }
  return explain_;
}

bool PointMatches(std::string_view doc, std::string_view field, std::string_view value) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, reinterpret_cast<const uint8_t*>(doc.data()), doc.size()) ||
      !bson_iter_find_w_len(&it, field.data(), static_cast<int>(field.size())))
    return false;
  // A Symbol compares as the string it holds (MongoDB's order, and the key
  // the index gives it).
  auto is_value = [&](const bson_iter_t* e) {
    uint32_t len;
    const char* s;
    if (BSON_ITER_HOLDS_UTF8(e)) {
      s = bson_iter_utf8(e, &len);
    } else if (BSON_ITER_HOLDS_SYMBOL(e)) {
      s = bson_iter_symbol(e, &len);
    } else {
      return false;
    }
    return std::string_view(s, len) == value;
  };
  if (is_value(&it)) return true;
  bson_iter_t elems;
  if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &elems)) return false;
  while (bson_iter_next(&elems))
    if (is_value(&elems)) return true;
  return false;
}

std::unique_ptr<CursorImpl> CursorImpl::CreatePoint(TransactionImpl* t, CollState* c,
                                                    std::string_view field, std::string_view value,
                                                    const FindOptions& options) {
  // Bad counts fall through to Create, which refuses them.
  if (!options.projection.empty() || !options.sort_field.empty() || !options.sort.empty() ||
      !CheckCounts(options).ok())
    return nullptr;
  std::unique_ptr<CursorImpl> cur(new CursorImpl());
  cur->t_ = t;
  cur->c_ = c;
  cur->options_ = options;
  if (!c->exists) {
    cur->mode_ = Mode::kEmpty;
    cur->explain_.plan = "EOF";
    return cur;
  }
  if (field == "_id") {
    // _id keys are unique and never arrays: the key equality is the match.
    cur->index_tree_ = c->primary.get();
    cur->index_is_primary_ = true;
    cur->index_unique_ = true;
    cur->explain_.plan = "IDHACK";
  } else {
    size_t i = 0;
    while (i < c->meta.indexes.size() &&
           (c->meta.indexes[i].field != field || !c->meta.indexes[i].simple()))
      i++;
    if (i == c->meta.indexes.size()) return nullptr;
    cur->index_tree_ = c->index_trees[i].get();
    cur->index_unique_ = c->meta.indexes[i].unique;
    cur->dedup_ = c->meta.indexes[i].multikey;
    cur->explain_.plan = "IXSCAN";
    cur->point_check_ = true;
    cur->point_field_.assign(field);
    cur->point_value_.assign(value);
  }
  cur->mode_ = Mode::kIndex;
  cur->explain_.index.assign(field);
  bson_value_t v;
  v.value_type = BSON_TYPE_UTF8;
  v.value.v_utf8.str = const_cast<char*>(value.data());
  v.value.v_utf8.len = static_cast<uint32_t>(value.size());
  engine::KeyInterval iv;
  // Type byte, value, terminator: one allocation.
  iv.lo.reserve(value.size() + 4);
  engine::AppendKey(&v, &iv.lo);
  if (cur->index_unique_) {
    // At most one entry has this key: one lookup (NextFromPoint), no
    // interval and no tree cursor.
    cur->mode_ = Mode::kPoint;
    cur->point_key_ = std::move(iv.lo);
    cur->Track();
    return cur;
  }
  iv.hi = iv.lo;
  iv.lo_inclusive = iv.hi_inclusive = true;
  cur->intervals_.push_back(std::move(iv));
  cur->cursor_.emplace(cur->index_tree_);
  cur->Track();
  return cur;
}

Status CursorImpl::Materialize() {
  // Decorate each match with one sort key: the order-preserving encodings
  // (AppendKey) of its engine::SortKey values, one after another, each
  // byte complemented for a descending key. The encodings are prefix-free,
  // so one bytewise comparison of two such keys orders by the first sort
  // key, then the second, and so on; complementing reverses the order of
  // distinct values. Ties go by arrival, so that equal keys keep the
  // plan's order whatever the limit.
  struct Entry {
    std::string key;
    uint64_t seq;
    size_t slot;  // the document: docs[slot]
  };
  auto before = [](const Entry& a, const Entry& b) {
    int c = a.key.compare(b.key);
    return c != 0 ? c < 0 : a.seq < b.seq;
  };
  std::vector<std::string> docs;
  auto size_of = [&docs](const Entry& e) {
    return sizeof(Entry) + sizeof(std::string) + e.key.size() + docs[e.slot].size();
  };
  // With a limit only the first skip + limit in sort order are kept: a
  // max-heap whose top is the worst of them.
  const uint64_t keep =
      options_.limit > 0 ? static_cast<uint64_t>(options_.skip) + options_.limit : 0;
  const uint64_t max_bytes = options_.max_sort_bytes;
  std::vector<Entry> held;
  uint64_t bytes = 0;
  uint64_t seq = 0;
  std::string_view d;
  while (NextMatch(&d)) {
    Entry e;
    e.seq = seq++;
    for (const SortSpec& k : sort_) {
      bson_value_t v;
      engine::SortKey(reinterpret_cast<const uint8_t*>(d.data()), d.size(), k.field, k.direction,
                      &v);
      const size_t at = e.key.size();
      engine::AppendKey(&v, &e.key);
      if (k.direction < 0) {
        for (size_t i = at; i < e.key.size(); i++) e.key[i] = static_cast<char>(~e.key[i]);
      }
    }
    if (keep != 0 && held.size() == keep) {
      if (!before(e, held.front())) continue;  // not among the first keep
      std::pop_heap(held.begin(), held.end(), before);
      bytes -= size_of(held.back());
      e.slot = held.back().slot;  // reused
      held.pop_back();
      docs[e.slot].assign(d);
    } else {
      e.slot = docs.size();
      docs.emplace_back(d);
    }
    bytes += size_of(e);
    if (max_bytes != 0 && bytes > max_bytes) {
      return Status::InvalidArgument(
          "sort exceeded memory limit of " + std::to_string(max_bytes) +
          " bytes (FindOptions::max_sort_bytes); add an index on the sort field, a limit or a "
          "narrower filter");
    }
    held.push_back(std::move(e));
    if (keep != 0) std::push_heap(held.begin(), held.end(), before);
  }
  MMDOC_RETURN_IF_ERROR(status_);
  if (keep != 0) {
    std::sort_heap(held.begin(), held.end(), before);
  } else {
    // A merge sort: std::sort degenerated to its heapsort fallback on
    // keys such as "user0".."user999999" in _id order.
    std::stable_sort(held.begin(), held.end(), before);
  }
  materialized_.reserve(held.size());
  for (Entry& e : held) materialized_.push_back(std::move(docs[e.slot]));
  mode_ = Mode::kMaterialized;
  return Status::OK();
}

bool CursorImpl::NextFromScan(std::string_view* doc) {
  Status s;
  while (true) {
    if (!started_) {
      started_ = true;
      s = cursor_->SeekToFirst();
    } else if (stay_) {
      stay_ = false;  // Reposition's entry is the next
    } else {
      s = cursor_->Next();
    }
    // On entering a leaf, one search of its bytes for the filter's needle
    // rejects every document in it (their bytes lie in the leaf), in place
    // of a search per document and the cursor's work per entry.
    while (s.ok() && cursor_->Valid() && filter_.HasNeedle()) {
      bool all_inline;
      std::string_view leaf = cursor_->LeafBytes(&all_inline);
      if (leaf.data() == checked_leaf_) break;
      if (!all_inline ||
          filter_.MayMatchIn(reinterpret_cast<const uint8_t*>(leaf.data()), leaf.size())) {
        checked_leaf_ = leaf.data();
        break;
      }
      uint64_t skipped = 0;
      s = cursor_->SkipLeaf(&skipped);
      explain_.docs_examined += skipped;
    }
    if (!s.ok()) {
      status_ = s;
      return false;
    }
    if (!cursor_->Valid()) return false;
    // A skipped leaf of a run no longer hides older versions of its keys.
    bool hidden = false;
    if (Status h = cursor_->Hidden(&hidden); !h.ok()) {
      status_ = h;
      return false;
    }
    if (hidden) continue;
    std::string_view d = cursor_->value();
    explain_.docs_examined++;
    const bool match = filter_.Matches(reinterpret_cast<const uint8_t*>(d.data()), d.size());
    if (Status e = engine::TakeRegexMatchError(); !e.ok()) {
      status_ = e;
      return false;
    }
    if (match) {
      *doc = d;
      return true;
    }
  }
}

Status CursorImpl::StartInterval() {
  const engine::KeyInterval& iv = intervals_[interval_];
  // Bounds are read as prefixes (index_plan.h): an entry "is" bound when it
  // starts with it. A non-unique entry is value + pk, a compound key one
  // field's encoding after another; for a whole single value both
  // readings agree, encodings being prefix-free.
  auto value_is = [](std::string_view k, const std::string& bound) {
    return k.size() >= bound.size() && std::memcmp(k.data(), bound.data(), bound.size()) == 0;
  };
  if (walk_dir_ < 0) {
    if (iv.hi.empty()) return cursor_->SeekToLast();
    // The last entry below `past`: below hi (exclusive), or below every
    // entry starting with hi (inclusive): hi with trailing 0xFF bytes
    // dropped and the last one incremented (a descending field's bytes
    // may be 0xFF anywhere).
    std::string past = iv.hi;
    if (iv.hi_inclusive) {
      while (!past.empty() && static_cast<unsigned char>(past.back()) == 0xFF) past.pop_back();
      if (past.empty()) return cursor_->SeekToLast();
      past.back() = static_cast<char>(static_cast<unsigned char>(past.back()) + 1);
    }
    MMDOC_RETURN_IF_ERROR(cursor_->Seek(past));
    return cursor_->Valid() ? cursor_->Prev() : cursor_->SeekToLast();
  }
  if (iv.lo.empty()) return cursor_->SeekToFirst();
  MMDOC_RETURN_IF_ERROR(cursor_->Seek(iv.lo));
  if (!iv.lo_inclusive) {
    // Skip entries whose value part equals lo.
    while (cursor_->Valid() && value_is(cursor_->key(), iv.lo))
      MMDOC_RETURN_IF_ERROR(cursor_->Next());
  }
  return Status::OK();
}

bool CursorImpl::NextFromIndex(std::string_view* doc) {
  while (interval_ < intervals_.size()) {
    Status s;
    if (!interval_started_) {
      interval_started_ = true;
      s = StartInterval();
    } else if (stay_) {
      stay_ = false;  // Reposition's entry is the next
    } else {
      s = walk_dir_ > 0 ? cursor_->Next() : cursor_->Prev();
    }
    if (!s.ok()) {
      status_ = s;
      return false;
    }
    const engine::KeyInterval& iv = intervals_[interval_];
    // The bound the walk moves toward: hi forward, lo backward.
    const std::string& end = walk_dir_ > 0 ? iv.hi : iv.lo;
    const bool end_inclusive = walk_dir_ > 0 ? iv.hi_inclusive : iv.lo_inclusive;
    bool in_range = cursor_->Valid();
    if (in_range && !end.empty()) {
      std::string_view k = cursor_->key();
      // Compare the value part only (a non-unique entry is value + pk).
      // Key encodings are prefix-free, so an equal prefix means an equal
      // value.
      std::string_view kv = k.substr(0, std::min(k.size(), end.size()));
      int c = kv.compare(std::string_view(end)) * walk_dir_;
      if (c > 0 || (c == 0 && !end_inclusive)) in_range = false;
    }
    if (!in_range) {
      interval_++;
      interval_started_ = false;
      continue;
    }
    explain_.keys_examined++;
    std::string_view d;
    if (index_is_primary_) {
      d = cursor_->value();
    } else {
      std::string_view pk = cursor_->value();
      if (dedup_ && !seen_.insert(std::string(pk)).second) continue;
      if (!FetchByPk(pk, &d)) return false;
    }
    explain_.docs_examined++;
    if (!null_pass_.empty() && null_pass_[interval_] != kNullPassAll) {
      // The null key's documents: [] sorts as undefined, the rest as null.
      bson_value_t v;
      engine::SortKey(reinterpret_cast<const uint8_t*>(d.data()), d.size(), sort_path_, 1, &v);
      const bool empty_array = v.value_type == BSON_TYPE_UNDEFINED;
      if (empty_array != (null_pass_[interval_] == kNullPassEmptyArrays)) continue;
    }
    const bool match =
        exact_ ||
        (point_check_ ? PointMatches(d, point_field_, point_value_)
                      : filter_.Matches(reinterpret_cast<const uint8_t*>(d.data()), d.size()));
    if (Status e = engine::TakeRegexMatchError(); !e.ok()) {
      status_ = e;
      return false;
    }
    if (match) {
      *doc = d;
      return true;
    }
  }
  return false;
}

bool CursorImpl::FetchByPk(std::string_view pk, std::string_view* doc) {
  Status s = c_->primary->Get(pk, doc);
  if (s.ok()) return true;
  status_ = s.IsNotFound()
                ? Status::Corruption("index entry points at a missing document", explain_.index)
                : s;
  return false;
}

bool CursorImpl::NextFromPoint(std::string_view* doc) {
  if (point_done_) return false;
  point_done_ = true;
  std::string_view v;
  Status s = index_tree_->Get(point_key_, &v);  // NotFound for an oversized key too
  if (s.IsNotFound()) return false;
  if (!s.ok()) {
    status_ = s;
    return false;
  }
  explain_.keys_examined++;
  std::string_view d = v;
  if (!index_is_primary_ && !FetchByPk(v, &d)) return false;
  explain_.docs_examined++;
  if (point_check_ && !PointMatches(d, point_field_, point_value_)) return false;
  *doc = d;
  return true;
}

bool CursorImpl::NextMatch(std::string_view* doc) {
  switch (mode_) {
    case Mode::kEmpty:
      return false;
    case Mode::kPoint:
      return NextFromPoint(doc);
    case Mode::kScan:
      return NextFromScan(doc);
    case Mode::kIndex:
      return NextFromIndex(doc);
    case Mode::kMaterialized:
      if (mat_pos_ >= materialized_.size()) return false;
      *doc = materialized_[mat_pos_++];
      return true;
  }
  return false;
}

bool CursorImpl::Next() {
  if (!status_.ok()) return false;
  // Committed or aborted under the cursor: the pages it walked may be gone.
  if (t_ != nullptr && t_->finished()) {
    status_ = Status::InvalidArgument("the cursor's transaction has ended (committed or aborted)");
    return false;
  }
  if (tracked_) {
    if (exhausted_) return false;  // a write must not restart a finished walk
    if (Status s = Revalidate(); !s.ok()) {
      status_ = s;
      return false;
    }
  }
  // Create refused negative counts.
  if (options_.limit != 0 && returned_ >= static_cast<uint64_t>(options_.limit)) return false;
  std::string_view d;
  while (true) {
    if (!NextMatch(&d)) {
      exhausted_ = true;
      positioned_ = false;
      return false;
    }
    if (skipped_ < static_cast<uint64_t>(options_.skip)) {
      skipped_++;
      continue;
    }
    break;
  }
  if (tracked_ && (mode_ == Mode::kScan || mode_ == Mode::kIndex)) {
    // Where a write's Reposition finds the walk again.
    last_key_.assign(cursor_->key());
    positioned_ = true;
  }
  returned_++;
  explain_.returned = returned_;
  if (projection_.empty()) {
    current_ = d;
  } else {
    current_storage_.clear();
    projection_.Apply(reinterpret_cast<const uint8_t*>(d.data()), d.size(), &current_storage_);
    current_ = current_storage_;
  }
  return true;
}

}  // namespace mmdoc
