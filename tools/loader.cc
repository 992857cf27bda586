#include "tools/loader.h"

#include <cstdio>
#include <utility>

#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Documents per transaction are also capped by their bytes, so that a
// batch of large documents does not become one huge transaction.
constexpr uint64_t kMaxBatchBytes = 32u << 20;

// The document's _id as JSON, or "" when it has none.
std::string IdJson(const Document& doc) {
  auto id = doc.Get("_id");
  return id.ok() ? id->ToJson() : std::string();
}

}  // namespace

Loader::Loader(DB* db, std::string collection, uint64_t batch, bool echo)
    : db_(db), collection_(std::move(collection)), batch_(batch == 0 ? 1 : batch), echo_(echo) {}

Loader::~Loader() {
  // An error path that did not Flush: drop the partial batch. Callers
  // Flush first whenever what came before the error should stay.
  txn_.reset();
}

Status Loader::Add(const Document& doc) {
  if (!txn_) {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    txn_ = std::move(txn).value();
  }
  Value id;
  Status s = txn_->Insert(collection_, doc, &id);
  if (!s.ok()) return Explain(s, doc);
  ids_.push_back(std::move(id));
  bytes_ += doc.size();
  if (ids_.size() >= batch_ || bytes_ >= kMaxBatchBytes) return Flush();
  return Status::OK();
}

Status Loader::Flush() {
  if (!txn_) return Status::OK();
  Status s = txn_->Commit();
  txn_.reset();
  if (!s.ok()) {
    ids_.clear();
    return s;
  }
  inserted_ += ids_.size();
  if (echo_) {
    for (const Value& id : ids_) {
      std::string line = id.ToJson();
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
    std::fflush(stdout);
  }
  ids_.clear();
  bytes_ = 0;
  return Status::OK();
}

Status Loader::Explain(const Status& s, const Document& doc) {
  if (!s.IsAlreadyExists()) return s;
  std::string id = IdJson(doc);
  if (!id.empty()) {
    auto existing = doc.Get("_id");
    if (existing.ok() && txn_->Get(collection_, *existing).ok()) {
      return Status::AlreadyExists("duplicate _id " + id);
    }
  }
  return Status::AlreadyExists("unique index violation", s.message());
}

int FailInsert(Loader* loader, const std::string& where, const std::string& detail) {
  Status s = loader->Flush();
  if (!s.ok()) {
    return Fail(kExitBadInput, where,
                detail + " (and committing the lines before it failed: " + Describe(s) + ")");
  }
  return Fail(kExitBadInput, where, detail);
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace mmdoc::tool
